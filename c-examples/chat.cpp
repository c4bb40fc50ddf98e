// chat.cpp: a chat loop through the model's own chat template, over a small RAII wrapper.
//
//   chat MODEL.gguf [max_tokens_per_reply]
//
// Reads one user message per line from stdin and prints the assistant's reply after each.
// The whole conversation is re-rendered through the template every turn; the context keeps
// the tokens it already holds when they match (kolibri_context_rewind to the common prefix),
// so only the new part is evaluated.
#include <kolibri.h>

#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kolibri {

// Thrown for any failed call; carries the status and kolibri_last_error()'s message.
class Error : public std::runtime_error {
public:
    Error(const char *what, kolibri_status status)
        : std::runtime_error(std::string(what) + ": " + kolibri_status_string(status) + ": " +
                             kolibri_last_error()),
          status_(status) {}
    kolibri_status status() const { return status_; }

private:
    kolibri_status status_;
};

inline void check(kolibri_status status, const char *what) {
    if (status != KOLIBRI_STATUS_OK) throw Error(what, status);
}

// Calls a (buf, capacity, len) function twice: once to size, once to fill.
template <typename F> std::string read_text(F &&call, const char *what) {
    size_t len = 0;
    kolibri_status st = call(nullptr, 0, &len);
    if (st != KOLIBRI_STATUS_BUFFER_TOO_SMALL) check(st, what);
    std::string out(len + 1, '\0');
    check(call(out.data(), out.size(), &len), what);
    out.resize(len);
    return out;
}

struct ModelDeleter {
    void operator()(kolibri_model *m) const { kolibri_model_free(m); }
};
struct ContextDeleter {
    void operator()(kolibri_context *c) const { kolibri_context_free(c); }
};
struct SamplerDeleter {
    void operator()(kolibri_sampler *s) const { kolibri_sampler_free(s); }
};

class Model {
public:
    explicit Model(const std::string &path) {
        kolibri_model *raw = nullptr;
        check(kolibri_model_load(path.c_str(), nullptr, &raw), "load model");
        handle_.reset(raw);
    }
    const kolibri_model *get() const { return handle_.get(); }

    std::vector<int32_t> tokenize(const std::string &text, bool add_special,
                                  bool parse_special) const {
        size_t n = 0;
        kolibri_status st = kolibri_tokenize(get(), text.data(), text.size(), add_special,
                                             parse_special, nullptr, 0, &n);
        if (st != KOLIBRI_STATUS_BUFFER_TOO_SMALL) check(st, "tokenize");
        std::vector<int32_t> ids(n);
        check(kolibri_tokenize(get(), text.data(), text.size(), add_special, parse_special,
                               ids.data(), ids.size(), &n),
              "tokenize");
        ids.resize(n);
        return ids;
    }

    std::string piece(int32_t token) const {
        return read_text(
            [&](char *buf, size_t cap, size_t *len) {
                return kolibri_token_to_piece(get(), token, false, buf, cap, len);
            },
            "token to piece");
    }

    bool is_end_of_generation(int32_t token) const {
        bool eog = false;
        check(kolibri_model_token_is_eog(get(), token, &eog), "is eog");
        return eog;
    }

    std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>> &chat,
                                    bool add_generation_prompt) const {
        std::vector<kolibri_chat_message> messages;
        for (const auto &[role, content] : chat)
            messages.push_back({role.c_str(), content.c_str()});
        return read_text(
            [&](char *buf, size_t cap, size_t *len) {
                return kolibri_chat_apply_template(get(), nullptr, messages.data(),
                                                   messages.size(), add_generation_prompt, buf,
                                                   cap, len);
            },
            "apply chat template");
    }

private:
    std::unique_ptr<kolibri_model, ModelDeleter> handle_;
};

class Context {
public:
    Context(const Model &model, uint32_t n_ctx) {
        kolibri_context_params params;
        check(kolibri_context_params_init(&params, sizeof params), "context params");
        params.n_ctx = n_ctx;
        kolibri_context *raw = nullptr;
        check(kolibri_context_new(model.get(), &params, &raw), "new context");
        handle_.reset(raw);
    }
    kolibri_context *get() const { return handle_.get(); }

    void eval(const std::vector<int32_t> &tokens) {
        check(kolibri_context_eval(get(), tokens.data(), tokens.size()), "eval");
    }
    void rewind(size_t n_keep) { check(kolibri_context_rewind(get(), n_keep), "rewind"); }

private:
    std::unique_ptr<kolibri_context, ContextDeleter> handle_;
};

class Sampler {
public:
    explicit Sampler(float temperature) {
        kolibri_sampler_params params;
        check(kolibri_sampler_params_init(&params, sizeof params), "sampler params");
        params.temperature = temperature;
        kolibri_sampler *raw = nullptr;
        check(kolibri_sampler_new(&params, &raw), "new sampler");
        handle_.reset(raw);
    }
    int32_t sample(const Context &ctx) {
        int32_t token = -1;
        check(kolibri_sampler_sample(handle_.get(), ctx.get(), &token), "sample");
        return token;
    }

private:
    std::unique_ptr<kolibri_sampler, SamplerDeleter> handle_;
};

} // namespace kolibri

int main(int argc, char **argv) {
    if (argc < 2) {
        std::cerr << "usage: " << argv[0] << " MODEL.gguf [max_tokens_per_reply]\n";
        return 2;
    }
    const int max_tokens = argc > 2 ? std::stoi(argv[2]) : 128;
    try {
        kolibri::Model model(argv[1]);
        kolibri::Context ctx(model, 2048);
        kolibri::Sampler sampler(0.0f); // greedy: the same conversation gives the same replies

        std::vector<std::pair<std::string, std::string>> chat;
        std::vector<int32_t> held; // tokens the context holds, in order
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line.empty()) continue;
            chat.emplace_back("user", line);
            std::string prompt = model.apply_chat_template(chat, true);
            // The template already writes any BOS; special-token texts become their ids.
            std::vector<int32_t> tokens = model.tokenize(prompt, false, true);

            size_t common = 0;
            while (common < held.size() && common < tokens.size() &&
                   held[common] == tokens[common])
                ++common;
            if (common == tokens.size()) --common; // re-evaluate one token to get logits
            ctx.rewind(common);
            ctx.eval(std::vector<int32_t>(tokens.begin() + common, tokens.end()));
            held = tokens;

            std::string reply;
            for (int i = 0; i < max_tokens; ++i) {
                int32_t next = sampler.sample(ctx);
                if (model.is_end_of_generation(next)) break;
                reply += model.piece(next);
                ctx.eval({next});
                held.push_back(next);
            }
            std::cout << "assistant: " << reply << std::endl;
            chat.emplace_back("assistant", reply);
        }
    } catch (const kolibri::Error &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
