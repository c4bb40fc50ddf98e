package kolibri

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The model tests need a real GGUF file: KOLIBRI_TEST_MODEL names one with a chat template
// (Qwen2.5-Coder-0.5B-Instruct); KOLIBRI_TEST_MODEL_NO_TEMPLATE optionally names one without.
var (
	sharedOnce  sync.Once
	sharedModel *Model
	sharedErr   error
)

// testModel loads KOLIBRI_TEST_MODEL once for all tests, or skips the test.
func testModel(t *testing.T) *Model {
	t.Helper()
	path := os.Getenv("KOLIBRI_TEST_MODEL")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL is not set")
	}
	sharedOnce.Do(func() { sharedModel, sharedErr = LoadModel(path, nil) })
	if sharedErr != nil {
		t.Fatalf("LoadModel(%q): %v", path, sharedErr)
	}
	return sharedModel
}

// wantStatus fails unless err is a *Error with the given status.
func wantStatus(t *testing.T, err error, want Status) *Error {
	t.Helper()
	var kerr *Error
	if !errors.As(err, &kerr) {
		t.Fatalf("got error %v, want a *kolibri.Error with status %v", err, want)
	}
	if kerr.Status != want {
		t.Fatalf("got status %v (%q), want %v", kerr.Status, kerr.Message, want)
	}
	return kerr
}

func greedySampler(t *testing.T) *Sampler {
	t.Helper()
	p := DefaultSamplerParams()
	p.Temperature = 0
	s, err := NewSampler(&p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// generate evaluates prompt on a fresh context and samples up to n tokens greedily.
func generate(m *Model, prompt string, parseSpecial bool, n int) (string, error) {
	ctx, err := NewContext(m, &ContextOptions{NCtx: 512})
	if err != nil {
		return "", err
	}
	defer ctx.Close()
	p := DefaultSamplerParams()
	p.Temperature = 0
	s, err := NewSampler(&p)
	if err != nil {
		return "", err
	}
	defer s.Close()
	toks, err := m.Tokenize(prompt, true, parseSpecial)
	if err != nil {
		return "", err
	}
	if err := ctx.Eval(toks); err != nil {
		return "", err
	}
	var out []Token
	for i := 0; i < n; i++ {
		tok, err := s.Sample(ctx)
		if err != nil {
			return "", err
		}
		if eog, err := m.IsEOG(tok); err != nil || eog {
			break
		}
		out = append(out, tok)
		if err := ctx.Eval([]Token{tok}); err != nil {
			return "", err
		}
	}
	return m.Detokenize(out, false)
}

func TestVersionAndSystemInfo(t *testing.T) {
	if v := Version(); v != HeaderVersion() {
		t.Errorf("library version %q, header version %q", v, HeaderVersion())
	}
	info, err := SystemInfo()
	if err != nil || !strings.Contains(info, "arch:") {
		t.Errorf("SystemInfo() = %q, %v", info, err)
	}
	if got := StatusIO.String(); got == "" || got == "unknown status" {
		t.Errorf("StatusIO.String() = %q", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := "/nonexistent/dir/model.gguf"
	m, err := LoadModel(path, nil)
	if m != nil {
		t.Fatal("got a model for a missing file")
	}
	kerr := wantStatus(t, err, StatusIO)
	if !strings.Contains(kerr.Message, path) {
		t.Errorf("message %q does not name the path", kerr.Message)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("Error() = %q does not name the path", err.Error())
	}
	_, err = LoadModel("bad\x00path", nil)
	wantStatus(t, err, StatusInvalidArgument)
}

func TestModelInfo(t *testing.T) {
	m := testModel(t)
	arch, err := m.Architecture()
	if err != nil || arch != "qwen2" {
		t.Errorf("Architecture() = %q, %v; want qwen2", arch, err)
	}
	d, err := m.Dims()
	if err != nil || d.NVocab <= 0 || d.NLayer == 0 || d.NParams == 0 {
		t.Errorf("Dims() = %+v, %v", d, err)
	}
	if meta, err := m.Meta("general.architecture"); err != nil || meta != arch {
		t.Errorf("Meta(general.architecture) = %q, %v", meta, err)
	}
	_, err = m.Meta("no.such.key")
	wantStatus(t, err, StatusNotFound)
	keys, err := m.MetaKeys()
	if err != nil || len(keys) == 0 || keys[0] == "" {
		t.Errorf("MetaKeys() = %d keys, %v", len(keys), err)
	}
	eos, err := m.SpecialToken(TokenEOS)
	if err != nil {
		t.Fatal(err)
	}
	if eog, err := m.IsEOG(eos); err != nil || !eog {
		t.Errorf("IsEOG(EOS %d) = %v, %v", eos, eog, err)
	}
	_, err = m.IsEOG(Token(d.NVocab))
	wantStatus(t, err, StatusInvalidToken)
}

func TestTokenizeRoundTrip(t *testing.T) {
	m := testModel(t)
	text := "Hello, wörld! 世界 🙂"
	toks, err := m.Tokenize(text, false, false)
	if err != nil || len(toks) == 0 {
		t.Fatalf("Tokenize = %v, %v", toks, err)
	}
	back, err := m.Detokenize(toks, false)
	if err != nil || back != text {
		t.Errorf("Detokenize = %q, %v; want %q", back, err, text)
	}
	// Pieces may split characters; joined, they are the text's bytes.
	var joined []byte
	for _, tok := range toks {
		piece, err := m.TokenToPiece(tok, false)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, piece...)
	}
	if string(joined) != text {
		t.Errorf("joined pieces %q, want %q", joined, text)
	}
	if empty, err := m.Tokenize("", false, false); err != nil || len(empty) != 0 {
		t.Errorf("Tokenize(\"\") = %v, %v", empty, err)
	}
	special, err := m.Tokenize("<|im_start|>", false, true)
	if err != nil || len(special) != 1 {
		t.Errorf("Tokenize(<|im_start|>, parseSpecial) = %v, %v; want one token", special, err)
	}
}

func TestGenerateGreedy(t *testing.T) {
	m := testModel(t)
	prompt := "def add(a, b):\n    return"
	text, err := generate(m, prompt, false, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%q -> %q", prompt, text)
	if !strings.Contains(text, "a + b") {
		t.Errorf("greedy continuation %q does not contain \"a + b\"", text)
	}
}

func TestChatTemplate(t *testing.T) {
	m := testModel(t)
	tmpl, err := m.ChatTemplate()
	if err != nil || !strings.Contains(tmpl, "im_start") {
		t.Fatalf("ChatTemplate() = %d bytes, %v", len(tmpl), err)
	}
	msgs := []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Write a Python function that returns the sum of two numbers."},
	}
	prompt, err := m.ApplyChatTemplate(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, "<|im_start|>user\nWrite a Python") ||
		!strings.HasSuffix(prompt, "<|im_start|>assistant\n") {
		t.Errorf("rendered prompt %q lacks the user turn or the generation prompt", prompt)
	}
	reply, err := generate(m, prompt, true, 24)
	if err != nil || strings.TrimSpace(reply) == "" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	t.Logf("chat reply: %q", reply)

	custom, err := m.ApplyCustomChatTemplate("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}", msgs[1:], false)
	if err != nil || custom != "[user] "+msgs[1].Content+"\n" {
		t.Errorf("custom template gave %q, %v", custom, err)
	}
	_, err = m.ApplyCustomChatTemplate("{% for x in messages %}", msgs, true)
	wantStatus(t, err, StatusTemplateError)
}

func TestNoChatTemplate(t *testing.T) {
	path := os.Getenv("KOLIBRI_TEST_MODEL_NO_TEMPLATE")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL_NO_TEMPLATE is not set")
	}
	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.ChatTemplate()
	wantStatus(t, err, StatusNotFound)
	_, err = m.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, true)
	wantStatus(t, err, StatusNotFound)
}

func TestContextErrors(t *testing.T) {
	m := testModel(t)
	d, err := m.Dims()
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := NewContext(m, &ContextOptions{NCtx: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	_, err = ctx.Logits()
	wantStatus(t, err, StatusInvalidState)
	wantStatus(t, ctx.Eval([]Token{1, Token(d.NVocab)}), StatusInvalidToken)
	wantStatus(t, ctx.Eval([]Token{-3}), StatusInvalidToken)
	wantStatus(t, ctx.Eval(nil), StatusInvalidArgument)
	wantStatus(t, ctx.Eval(make([]Token, 9)), StatusContextFull)
	if n, nctx, err := ctx.Size(); err != nil || n != 0 || nctx != 8 {
		t.Errorf("Size() after failed evals = %d, %d, %v; want 0, 8", n, nctx, err)
	}
	_, err = NewContext(m, &ContextOptions{NCtx: d.NCtxTrain + 1})
	wantStatus(t, err, StatusInvalidArgument)
	_, err = NewContext(m, &ContextOptions{NCtx: 8, TypeK: KVType(7)})
	wantStatus(t, err, StatusInvalidArgument)
	q8, err := NewContext(m, &ContextOptions{NCtx: 8, TypeK: KVQ8_0, TypeV: KVQ4_0})
	if err != nil {
		t.Fatal(err)
	}
	if err := q8.Eval([]Token{1, 2, 3}); err != nil {
		t.Errorf("eval with a Q8_0/Q4_0 cache: %v", err)
	}
	q8.Close()
	_, err = NewSampler(&SamplerParams{}) // the zero value is not valid: repeat_penalty 0
	wantStatus(t, err, StatusInvalidArgument)
}

func TestLogitsAndRewind(t *testing.T) {
	m := testModel(t)
	ctx, err := NewContext(m, &ContextOptions{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	s := greedySampler(t)
	defer s.Close()
	toks, err := m.Tokenize("The capital of France is", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Eval(toks); err != nil {
		t.Fatal(err)
	}
	logits, err := ctx.Logits()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m.Dims()
	if len(logits) != int(d.NVocab) {
		t.Fatalf("%d logits, want %d", len(logits), d.NVocab)
	}
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	tok, err := s.Sample(ctx)
	if err != nil || tok != Token(best) {
		t.Errorf("greedy Sample = %d, %v; argmax of Logits is %d", tok, err, best)
	}
	// Rewinding one token and evaluating it again gives the same logits each time. (Not
	// necessarily those of the whole-prompt eval: results may depend on how the tokens were
	// split into batches.)
	var prev []float32
	for i := 0; i < 2; i++ {
		if err := ctx.Rewind(len(toks) - 1); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := ctx.Size(); n != len(toks)-1 {
			t.Errorf("Size after Rewind = %d, want %d", n, len(toks)-1)
		}
		if _, err := ctx.Logits(); err == nil {
			t.Error("Logits after Rewind succeeded; want StatusInvalidState")
		}
		if err := ctx.Eval(toks[len(toks)-1:]); err != nil {
			t.Fatal(err)
		}
		again, err := ctx.Logits()
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && again[best] != prev[best] {
			t.Errorf("logit after the second rewind+eval %v, after the first %v", again[best], prev[best])
		}
		prev = again
	}
	if err := s.Accept(tok); err != nil {
		t.Error(err)
	}
	if err := s.Reset(); err != nil {
		t.Error(err)
	}
}

func TestSaveAndLoadState(t *testing.T) {
	m := testModel(t)
	a, err := NewContext(m, &ContextOptions{NCtx: 64, TypeK: KVQ8_0})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	toks, _ := m.Tokenize("The capital of France is", true, false)
	if err := a.Eval(toks); err != nil {
		t.Fatal(err)
	}
	state, err := a.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prompt.state")
	if err := a.SaveStateFile(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Eval([]Token{1000}); err != nil {
		t.Fatal(err)
	}
	want, _ := a.Logits()
	for _, load := range []func(*Context) error{
		func(c *Context) error { return c.LoadState(state) },
		func(c *Context) error { return c.LoadStateFile(path) },
	} {
		b, err := NewContext(m, &ContextOptions{NCtx: 64, TypeK: KVQ8_0})
		if err != nil {
			t.Fatal(err)
		}
		if err := load(b); err != nil {
			t.Fatal(err)
		}
		held, err := b.Tokens()
		if err != nil || len(held) != len(toks) || held[0] != toks[0] {
			t.Fatalf("Tokens() = %v, %v; want %v", held, err, toks)
		}
		if err := b.Eval([]Token{1000}); err != nil {
			t.Fatal(err)
		}
		got, _ := b.Logits()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("logit %d: %v after loading, %v continuing", i, got[i], want[i])
			}
		}
		b.Close()
	}
	// A corrupted state is refused; the context keeps what it held.
	bad := append([]byte(nil), state...)
	bad[len(bad)/2] ^= 1
	wantStatus(t, a.LoadState(bad), StatusBadState)
	if held, _ := a.Tokens(); len(held) != len(toks)+1 {
		t.Fatalf("after a refused load the context holds %d tokens, want %d", len(held), len(toks)+1)
	}
}

func TestConcurrentContexts(t *testing.T) {
	m := testModel(t)
	prompt := "// A function that reverses a string in Go\nfunc reverse(s string) string {"
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			outs[i], errs[i] = generate(m, prompt, false, 16)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("both goroutines: %q", outs[0])
	if outs[0] != outs[1] || outs[0] == "" {
		t.Errorf("outputs differ or are empty: %q vs %q", outs[0], outs[1])
	}
}

func TestProgress(t *testing.T) {
	path := os.Getenv("KOLIBRI_TEST_MODEL")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL is not set")
	}
	calls := 0
	_, err := LoadModel(path, &ModelOptions{Progress: func(p float32) bool {
		calls++
		return p < 0.5
	}})
	wantStatus(t, err, StatusCancelled)
	if calls == 0 {
		t.Error("progress callback never called")
	}

	// A panic in the callback cancels the load and reaches the caller.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the callback's panic", r)
			}
		}()
		_, _ = LoadModel(path, &ModelOptions{NoMmap: true, Progress: func(float32) bool { panic("boom") }})
		t.Error("LoadModel returned instead of panicking")
	}()

	last := float32(-1)
	m, err := LoadModel(path, &ModelOptions{Threads: 1, Progress: func(p float32) bool { last = p; return true }})
	if err != nil {
		t.Fatal(err)
	}
	if last != 1 {
		t.Errorf("last progress %v, want 1", last)
	}
	m.Close()
}

func TestPagedWeights(t *testing.T) {
	path := os.Getenv("KOLIBRI_TEST_MODEL")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL is not set")
	}
	_, err := LoadModel(path, &ModelOptions{PagedWeights: true, Mlock: true})
	wantStatus(t, err, StatusInvalidArgument)
	m, err := LoadModel(path, &ModelOptions{PagedWeights: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text, err := generate(m, "def add(a, b):\n    return", false, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "a + b") {
		t.Errorf("paged greedy continuation %q does not contain \"a + b\"", text)
	}
}

func TestCloseOrder(t *testing.T) {
	path := os.Getenv("KOLIBRI_TEST_MODEL")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL is not set")
	}
	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := NewContext(m, &ContextOptions{NCtx: 32})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := m.Tokenize("Hello", true, false)
	if err != nil {
		t.Fatal(err)
	}
	// The context keeps the weights alive after the model handle is freed.
	m.Close()
	m.Close()
	if err := ctx.Eval(toks); err != nil {
		t.Errorf("Eval after the model was closed: %v", err)
	}
	_, err = m.Tokenize("Hello", true, false)
	wantStatus(t, err, StatusInvalidArgument)
	ctx.Close()
	ctx.Close()
	wantStatus(t, ctx.Eval(toks), StatusInvalidArgument)
}
