package kolibri

/*
#include <stdint.h>
#include <stdlib.h>
#include <kolibri.h>

// Defined in progress.go.
extern bool kolibriGoProgress(float progress, void *user_data);

// Loads with the Go progress callback; user_data is a cgo.Handle, converted here so that Go
// never turns an integer into a pointer.
static kolibri_status kolibri_go_load(const char *path, kolibri_model_params *params,
                                      uintptr_t handle, kolibri_model **out) {
	if (handle != 0) {
		params->progress_callback = kolibriGoProgress;
		params->progress_user_data = (void *)handle;
	}
	return kolibri_model_load(path, params, out);
}
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// SpecialToken names a special token a model may define.
type SpecialToken int32

// The special tokens kolibri_model_special_token knows.
const (
	TokenBOS SpecialToken = C.KOLIBRI_SPECIAL_TOKEN_BOS // beginning of sequence
	TokenEOS SpecialToken = C.KOLIBRI_SPECIAL_TOKEN_EOS // end of sequence
)

// ModelOptions configures LoadModel. The zero value means the library's defaults.
type ModelOptions struct {
	// Threads is the worker count of contexts that ask for 0; 0 means one per CPU core.
	Threads uint32
	// NoMmap reads the file into private memory instead of mapping it (mapping is the default).
	NoMmap bool
	// Mlock locks the model's memory so it is never paged out (needs RLIMIT_MEMLOCK).
	Mlock bool
	// PagedWeights leaves the weights in the mapped file and streams them layer by layer, for a
	// model larger than the memory available (slower; cannot be combined with NoMmap or Mlock).
	PagedWeights bool
	// MTPBlocks is how many multi-token-prediction blocks to load: 0, or 1 for the model's
	// first (Qwen3.5 / 3.6 files carry one), which NewMTPSpeculator drafts with.
	MTPBlocks uint
	// Progress, if set, is called on the loading goroutine with the fraction done in [0, 1];
	// returning false cancels the load (LoadModel then fails with StatusCancelled).
	Progress func(progress float32) bool
}

// Model is a loaded GGUF model: weights, tokenizer and metadata. It is immutable, and safe
// for concurrent use by any number of goroutines.
type Model struct {
	ptr *C.kolibri_model
}

// Dims are a model's scalar facts.
type Dims struct {
	NParams   uint64 // number of weight elements
	NCtxTrain uint32 // context length the model was trained with
	NVocab    int32  // vocabulary size; token ids are 0 .. NVocab-1
	NEmbd     uint32 // embedding width
	NLayer    uint32 // transformer layers
}

// Message is one message of a conversation for ApplyChatTemplate.
type Message struct {
	Role    string // "system", "user", "assistant", ...
	Content string
}

// LoadModel loads the GGUF model at path. opts may be nil for the defaults.
func LoadModel(path string, opts *ModelOptions) (*Model, error) {
	cpath, err := cString("path", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cpath))

	var params C.kolibri_model_params
	C.kolibri_model_params_init(&params, C.size_t(unsafe.Sizeof(params)))
	var state *progressState
	var handle cgo.Handle
	if opts != nil {
		params.n_threads = C.uint32_t(opts.Threads)
		params.use_mmap = C.bool(!opts.NoMmap)
		params.use_mlock = C.bool(opts.Mlock)
		params.paged_weights = C.bool(opts.PagedWeights)
		params.n_mtp_blocks = C.size_t(opts.MTPBlocks)
		if opts.Progress != nil {
			state = &progressState{fn: opts.Progress}
			handle = cgo.NewHandle(state)
			defer handle.Delete()
		}
	}

	var ptr *C.kolibri_model
	err = call(func() C.kolibri_status {
		return C.kolibri_go_load(cpath, &params, C.uintptr_t(handle), &ptr)
	})
	if state != nil && state.panicked != nil {
		C.kolibri_model_free(ptr) // NULL unless the panic came at the very end
		panic(state.panicked)
	}
	if err != nil {
		return nil, err
	}
	m := &Model{ptr: ptr}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close frees the model. Contexts created from it keep its weights alive and stay usable.
// Calling Close again does nothing.
func (m *Model) Close() error {
	if m.ptr != nil {
		C.kolibri_model_free(m.ptr)
		m.ptr = nil
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

// handle returns the C pointer, or an error once the model is closed (C would report a
// confusing "model is NULL").
func (m *Model) handle() (*C.kolibri_model, error) {
	if m == nil || m.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "model is closed"}
	}
	return m.ptr, nil
}

// getString runs a (buf, capacity, *len) query on the model.
func (m *Model) getString(f func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status) (string, error) {
	p, err := m.handle()
	if err != nil {
		return "", err
	}
	s, err := getString(func(buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return f(p, buf, capacity, n)
	})
	runtime.KeepAlive(m)
	return s, err
}

// Architecture returns the model's architecture name (general.architecture, e.g. "qwen2").
func (m *Model) Architecture() (string, error) {
	return m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_model_architecture(p, buf, capacity, n)
	})
}

// Dims returns the model's dimensions.
func (m *Model) Dims() (Dims, error) {
	p, err := m.handle()
	if err != nil {
		return Dims{}, err
	}
	var d C.kolibri_model_dims
	err = call(func() C.kolibri_status {
		return C.kolibri_model_get_dims(p, &d, C.sizeof_kolibri_model_dims)
	})
	runtime.KeepAlive(m)
	if err != nil {
		return Dims{}, err
	}
	return Dims{
		NParams:   uint64(d.n_params),
		NCtxTrain: uint32(d.n_ctx_train),
		NVocab:    int32(d.n_vocab),
		NEmbd:     uint32(d.n_embd),
		NLayer:    uint32(d.n_layer),
	}, nil
}

// Tokenize splits text into token ids. addSpecial prepends BOS when the model wants one;
// parseSpecial turns special-token texts such as "<|im_start|>" into their ids.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	p, err := m.handle()
	if err != nil {
		return nil, err
	}
	// The text is passed with its length, so it needs no NUL and may live in Go memory.
	var ctext *C.char
	if len(text) > 0 {
		b := []byte(text)
		ctext = (*C.char)(unsafe.Pointer(&b[0]))
		defer runtime.KeepAlive(b)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer runtime.KeepAlive(m)
	var n C.size_t
	st := C.kolibri_tokenize(p, ctext, C.size_t(len(text)), C.bool(addSpecial), C.bool(parseSpecial), nil, 0, &n)
	for attempt := 0; st == C.KOLIBRI_STATUS_BUFFER_TOO_SMALL && attempt < 4; attempt++ {
		toks := make([]Token, n)
		st = C.kolibri_tokenize(p, ctext, C.size_t(len(text)), C.bool(addSpecial), C.bool(parseSpecial),
			(*C.int32_t)(unsafe.Pointer(&toks[0])), C.size_t(len(toks)), &n)
		if st == C.KOLIBRI_STATUS_OK {
			return toks[:n], nil
		}
	}
	if st == C.KOLIBRI_STATUS_OK { // the (NULL, 0) query fits when there are no tokens
		return []Token{}, nil
	}
	return nil, lastError(st)
}

// TokenToPiece returns the bytes one token contributes to text. A piece can be part of a
// multi-byte UTF-8 character, so join pieces before decoding. With special false, control
// tokens give no bytes.
func (m *Model) TokenToPiece(token Token, special bool) ([]byte, error) {
	p, err := m.handle()
	if err != nil {
		return nil, err
	}
	b, err := getBytes(func(buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_token_to_piece(p, C.int32_t(token), C.bool(special), buf, capacity, n)
	})
	runtime.KeepAlive(m)
	return b, err
}

// Detokenize turns token ids back into text; invalid UTF-8 becomes U+FFFD. With special
// false, control tokens are left out.
func (m *Model) Detokenize(tokens []Token, special bool) (string, error) {
	var ptr *C.int32_t
	if len(tokens) > 0 {
		ptr = (*C.int32_t)(unsafe.Pointer(&tokens[0]))
	}
	s, err := m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_detokenize(p, ptr, C.size_t(len(tokens)), C.bool(special), buf, capacity, n)
	})
	runtime.KeepAlive(tokens)
	return s, err
}

// IsEOG reports whether token ends a generation (EOS, end-of-turn and similar).
func (m *Model) IsEOG(token Token) (bool, error) {
	p, err := m.handle()
	if err != nil {
		return false, err
	}
	var out C.bool
	err = call(func() C.kolibri_status { return C.kolibri_model_token_is_eog(p, C.int32_t(token), &out) })
	runtime.KeepAlive(m)
	return bool(out), err
}

// SpecialToken returns the id of a special token; StatusNotFound if the model has none.
func (m *Model) SpecialToken(kind SpecialToken) (Token, error) {
	p, err := m.handle()
	if err != nil {
		return 0, err
	}
	var out C.int32_t
	err = call(func() C.kolibri_status { return C.kolibri_model_special_token(p, C.int32_t(kind), &out) })
	runtime.KeepAlive(m)
	return Token(out), err
}

// Meta returns a metadata value as text (numbers printed, arrays as "[a, b, ...]");
// StatusNotFound if there is no such key.
func (m *Model) Meta(key string) (string, error) {
	ckey, err := cString("key", key)
	if err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(ckey))
	return m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_model_meta_string(p, ckey, buf, capacity, n)
	})
}

// MetaKeys returns every metadata key, in file order.
func (m *Model) MetaKeys() ([]string, error) {
	p, err := m.handle()
	if err != nil {
		return nil, err
	}
	var count C.size_t
	err = call(func() C.kolibri_status { return C.kolibri_model_meta_count(p, &count) })
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, int(count))
	for i := C.size_t(0); i < count; i++ {
		k, err := m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
			return C.kolibri_model_meta_key(p, i, buf, capacity, n)
		})
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	runtime.KeepAlive(m)
	return keys, nil
}

// ChatTemplate returns the model's Jinja chat template; StatusNotFound if it has none.
func (m *Model) ChatTemplate() (string, error) {
	return m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_model_chat_template(p, buf, capacity, n)
	})
}

// ApplyChatTemplate renders messages through the model's chat template. With
// addGenerationPrompt the text ends where the assistant's reply begins. Tokenize the result
// with parseSpecial true.
func (m *Model) ApplyChatTemplate(messages []Message, addGenerationPrompt bool) (string, error) {
	return m.applyTemplate(nil, messages, addGenerationPrompt)
}

// ApplyCustomChatTemplate is ApplyChatTemplate with the given Jinja source instead of the
// model's template.
func (m *Model) ApplyCustomChatTemplate(template string, messages []Message, addGenerationPrompt bool) (string, error) {
	src, err := cString("template", template)
	if err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(src))
	return m.applyTemplate(src, messages, addGenerationPrompt)
}

func (m *Model) applyTemplate(src *C.char, messages []Message, addGenerationPrompt bool) (string, error) {
	// The strings go to C memory: a Go array handed to C may hold C pointers, not Go ones.
	cmsgs := make([]C.kolibri_chat_message, len(messages))
	defer func() {
		for _, cm := range cmsgs {
			C.free(unsafe.Pointer(cm.role))
			C.free(unsafe.Pointer(cm.content))
		}
	}()
	for i, msg := range messages {
		var err error
		if cmsgs[i].role, err = cString("message role", msg.Role); err != nil {
			return "", err
		}
		if cmsgs[i].content, err = cString("message content", msg.Content); err != nil {
			return "", err
		}
	}
	var ptr *C.kolibri_chat_message
	if len(cmsgs) > 0 {
		ptr = &cmsgs[0]
	}
	return m.getString(func(p *C.kolibri_model, buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_chat_apply_template(p, src, ptr, C.size_t(len(cmsgs)), C.bool(addGenerationPrompt), buf, capacity, n)
	})
}
