package kolibri

import (
	"os"
	"strings"
	"testing"
)

// A prompt that repeats itself, so that prompt lookup finds drafts and the continuation
// repeats it again.
const repeatingPrompt = "def f1(x):\n    return x + 1\n\ndef f2(x):\n    return x + 2\n\n" +
	"def f3(x):\n    return x + 3\n\ndef f4(x):\n    return x + 4\n\ndef f5(x):\n"

// plainGreedy evaluates prompt on a fresh context and samples n tokens greedily with
// Sampler.Sample and Context.Eval, stopping after an end-of-generation token (kept).
func plainGreedy(t *testing.T, m *Model, prompt []Token, n int) []Token {
	t.Helper()
	ctx, err := NewContext(m, &ContextOptions{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	s := greedySampler(t)
	defer s.Close()
	if err := ctx.Eval(prompt); err != nil {
		t.Fatal(err)
	}
	var out []Token
	for len(out) < n {
		tok, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
		if eog, err := m.IsEOG(tok); err != nil || eog {
			break
		}
		if err := ctx.Eval([]Token{tok}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// specGreedy does the same through a Speculator on target (with draft, or nil for prompt
// lookup): the first token is sampled, then steps run until n tokens or an end-of-generation
// token. It checks what each step returns, the context's tokens and the stats' bookkeeping,
// and returns the tokens (cut at n, or after the first end-of-generation token) and the stats.
func specGreedy(t *testing.T, target, draft *Context, prompt []Token, n int, params *SpeculatorParams) ([]Token, SpeculatorStats) {
	t.Helper()
	m := target.Model()
	s := greedySampler(t)
	defer s.Close()
	if err := target.Eval(prompt); err != nil {
		t.Fatal(err)
	}
	pending, err := s.Sample(target)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := NewSpeculator(target, draft, params)
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Close()
	maxDraft := int(DefaultSpeculatorParams().MaxDraft)
	if params != nil {
		maxDraft = int(params.MaxDraft)
	}
	got := []Token{pending}
	steps, returned := 0, 0
	eogAt := -1
	for len(got) < n && eogAt < 0 {
		toks, err := spec.Step(s, pending)
		if err != nil {
			t.Fatalf("step %d: %v", steps, err)
		}
		steps++
		returned += len(toks)
		if len(toks) < 1 || len(toks) > maxDraft+1 {
			t.Fatalf("step %d returned %d tokens, want 1..%d", steps, len(toks), maxDraft+1)
		}
		for i, tok := range toks {
			if eog, err := m.IsEOG(tok); err != nil || eog {
				if i != len(toks)-1 {
					t.Errorf("step %d went on after the end-of-generation token %d: %v", steps, tok, toks)
				}
				eogAt = len(got) + i
			}
		}
		got = append(got, toks...)
		pending = toks[len(toks)-1]
	}

	// The target holds the prompt and every generated token but the pending one, and has
	// no logits until the pending token is evaluated.
	held, err := target.Tokens()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]Token(nil), prompt...), got[:len(got)-1]...)
	if !equalTokens(held, want) {
		t.Errorf("the target holds %d tokens %v, want the prompt and the generated tokens but the pending one (%d)", len(held), held, len(want))
	}
	_, err = target.Logits()
	wantStatus(t, err, StatusInvalidState)

	st, err := spec.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps: %+v", steps, st)
	if st.TargetPasses != uint64(steps) || st.Generated != uint64(returned) {
		t.Errorf("stats %+v after %d steps returning %d tokens", st, steps, returned)
	}
	if st.Accepted > st.Drafted || st.Generated != st.Accepted+st.TargetPasses {
		t.Errorf("inconsistent stats %+v (want accepted <= drafted, generated = accepted + passes)", st)
	}
	// Plain decoding continues after the pending token is evaluated.
	if err := target.Eval([]Token{pending}); err != nil {
		t.Errorf("Eval of the pending token after the steps: %v", err)
	} else if _, err := target.Logits(); err != nil {
		t.Errorf("Logits after evaluating the pending token: %v", err)
	}
	if eogAt >= 0 {
		got = got[:eogAt+1]
	}
	if len(got) > n {
		got = got[:n]
	}
	return got, st
}

func equalTokens(a, b []Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSpeculatorDefaults(t *testing.T) {
	p := DefaultSpeculatorParams()
	if p.MaxDraft != 16 || p.DraftPMin != 0.5 || p.LookupNgram != 4 {
		t.Errorf("DefaultSpeculatorParams() = %+v; want MaxDraft 16, DraftPMin 0.5, LookupNgram 4", p)
	}
}

// Greedy decoding through prompt lookup gives exactly plain greedy decoding's tokens, and
// lookup drafts (and gets drafts accepted) on a prompt that repeats itself.
func TestSpeculatorLookupGreedy(t *testing.T) {
	m := testModel(t)
	prompt, err := m.Tokenize(repeatingPrompt, true, false)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	want := plainGreedy(t, m, prompt, n)
	text, _ := m.Detokenize(want, false)
	t.Logf("plain greedy: %q", text)
	if len(want) < n {
		t.Fatalf("plain greedy stopped after %d tokens; the test needs %d", len(want), n)
	}
	for _, params := range []*SpeculatorParams{nil, {MaxDraft: 4, DraftPMin: 0.5, LookupNgram: 2}} {
		ctx, err := NewContext(m, &ContextOptions{NCtx: 512})
		if err != nil {
			t.Fatal(err)
		}
		got, st := specGreedy(t, ctx, nil, prompt, n, params)
		if !equalTokens(got, want) {
			gotText, _ := m.Detokenize(got, false)
			t.Errorf("params %+v: speculative greedy %v (%q)\nplain greedy %v (%q)", params, got, gotText, want, text)
		}
		if st.Drafted == 0 || st.Accepted == 0 {
			t.Errorf("params %+v: prompt lookup drafted %d tokens, %d accepted, on a repeating prompt", params, st.Drafted, st.Accepted)
		}
		if st.TargetPasses >= n {
			t.Errorf("params %+v: %d target passes for %d tokens: no speed-up", params, st.TargetPasses, n)
		}
		ctx.Close()
	}
}

// A draft model: KOLIBRI_TEST_MODEL drafting for KOLIBRI_TEST_MODEL_LARGE (a larger model of
// the same vocabulary, e.g. Qwen2.5-Coder-1.5B-Instruct), which must give the large model's
// plain greedy tokens.
func TestSpeculatorDraftModel(t *testing.T) {
	small := testModel(t)
	path := os.Getenv("KOLIBRI_TEST_MODEL_LARGE")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL_LARGE is not set")
	}
	large, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer large.Close()
	prompt, err := large.Tokenize(repeatingPrompt, true, false)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	want := plainGreedy(t, large, prompt, n)
	target, err := NewContext(large, &ContextOptions{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	draft, err := NewContext(small, &ContextOptions{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer draft.Close()

	// The draft must hold as many positions as the target, and be the smaller model.
	short, err := NewContext(small, &ContextOptions{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewSpeculator(target, short, nil)
	wantStatus(t, err, StatusInvalidArgument)
	short.Close()
	_, err = NewSpeculator(draft, target, nil)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "smaller") {
		t.Errorf("a larger draft: message %q does not say the draft must be smaller", kerr.Message)
	}

	got, st := specGreedy(t, target, draft, prompt, n, &SpeculatorParams{MaxDraft: 8, DraftPMin: 0.3, LookupNgram: 4})
	if !equalTokens(got, want) {
		t.Errorf("speculative greedy %v\nplain greedy       %v", got, want)
	}
	if st.Drafted == 0 || st.Accepted == 0 {
		t.Errorf("the draft model drafted %d tokens, %d accepted", st.Drafted, st.Accepted)
	}
}

func TestSpeculatorErrors(t *testing.T) {
	m := testModel(t)
	d, err := m.Dims()
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := NewContext(m, &ContextOptions{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	s := greedySampler(t)
	defer s.Close()

	// Params out of range.
	for _, bad := range []struct {
		p    SpeculatorParams
		name string
	}{
		{SpeculatorParams{MaxDraft: 0, DraftPMin: 0.5, LookupNgram: 4}, "max_draft"},
		{SpeculatorParams{MaxDraft: 33, DraftPMin: 0.5, LookupNgram: 4}, "max_draft"},
		{SpeculatorParams{MaxDraft: 16, DraftPMin: 0.5, LookupNgram: 0}, "lookup_ngram"},
		{SpeculatorParams{MaxDraft: 16, DraftPMin: 0.5, LookupNgram: 17}, "lookup_ngram"},
		{SpeculatorParams{MaxDraft: 16, DraftPMin: 1.5, LookupNgram: 4}, "draft_p_min"},
		{SpeculatorParams{}, "max_draft"},
	} {
		p := bad.p
		spec, err := NewSpeculator(ctx, nil, &p)
		if spec != nil {
			t.Errorf("NewSpeculator(%+v) gave a speculator", p)
		}
		if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, bad.name) {
			t.Errorf("NewSpeculator(%+v): message %q does not name %s", p, kerr.Message, bad.name)
		}
	}
	for _, p := range []SpeculatorParams{{MaxDraft: 1, DraftPMin: 0, LookupNgram: 1}, {MaxDraft: 32, DraftPMin: 1, LookupNgram: 16}} {
		spec, err := NewSpeculator(ctx, nil, &p)
		if err != nil {
			t.Errorf("NewSpeculator(%+v): %v", p, err)
			continue
		}
		spec.Close()
	}

	// Missing or closed contexts.
	_, err = NewSpeculator(nil, nil, nil)
	if kerr := wantStatus(t, err, StatusInvalidArgument); kerr.Message == "" {
		t.Error("no message for a nil target")
	}
	_, err = NewSpeculator(ctx, ctx, nil)
	wantStatus(t, err, StatusInvalidArgument)
	closed, err := NewContext(m, &ContextOptions{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	_, err = NewSpeculator(closed, nil, nil)
	wantStatus(t, err, StatusInvalidArgument)
	_, err = NewSpeculator(ctx, closed, nil)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "draft") {
		t.Errorf("closed draft: message %q does not name the draft", kerr.Message)
	}

	// The same model cannot draft for itself: a draft must be smaller.
	same, err := NewContext(m, &ContextOptions{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewSpeculator(ctx, same, nil)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "smaller") {
		t.Errorf("self-draft: message %q does not say the draft must be smaller", kerr.Message)
	}
	same.Close()

	// A model of another vocabulary cannot draft.
	if path := os.Getenv("KOLIBRI_TEST_MODEL_NO_TEMPLATE"); path != "" {
		other, err := LoadModel(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		octx, err := NewContext(other, &ContextOptions{NCtx: 64})
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewSpeculator(ctx, octx, nil)
		if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "cannot draft") {
			t.Errorf("another vocabulary: message %q", kerr.Message)
		}
		octx.Close()
		other.Close()
	}

	// Bad steps leave the context, the sampler and the stats as they were.
	prompt, _ := m.Tokenize("Hello, world", true, false)
	if err := ctx.Eval(prompt); err != nil {
		t.Fatal(err)
	}
	spec, err := NewSpeculator(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = spec.Step(s, Token(d.NVocab))
	wantStatus(t, err, StatusInvalidToken)
	_, err = spec.Step(s, -1)
	wantStatus(t, err, StatusInvalidToken)
	_, err = spec.Step(nil, 1)
	wantStatus(t, err, StatusInvalidArgument)
	closedSampler := greedySampler(t)
	closedSampler.Close()
	_, err = spec.Step(closedSampler, 1)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "sampler") {
		t.Errorf("closed sampler: message %q", kerr.Message)
	}
	if st, err := spec.Stats(); err != nil || st != (SpeculatorStats{}) {
		t.Errorf("stats after failed steps = %+v, %v; want zero", st, err)
	}
	if held, _ := ctx.Tokens(); !equalTokens(held, prompt) {
		t.Errorf("failed steps changed the context: %v, want %v", held, prompt)
	}
	toks, err := spec.Step(s, 1)
	if err != nil || len(toks) == 0 {
		t.Errorf("a step after failed ones: %v, %v", toks, err)
	}
	spec.Close()
	spec.Close()
	_, err = spec.Step(s, 1)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "closed") {
		t.Errorf("closed speculator: message %q", kerr.Message)
	}
	_, err = spec.Stats()
	wantStatus(t, err, StatusInvalidArgument)
	var nilSpec *Speculator
	_, err = nilSpec.Step(s, 1)
	wantStatus(t, err, StatusInvalidArgument)
	_, err = nilSpec.Stats()
	wantStatus(t, err, StatusInvalidArgument)

	// A full context: no room for the pending token; nothing changes.
	full, err := NewContext(m, &ContextOptions{NCtx: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if err := full.Eval([]Token{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	spec, err = NewSpeculator(full, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = spec.Step(s, 9)
	wantStatus(t, err, StatusContextFull)
	if n, _, _ := full.Size(); n != 8 {
		t.Errorf("a full context holds %d tokens after a failed step, want 8", n)
	}
	// The target closed under the speculator.
	full.Close()
	_, err = spec.Step(s, 9)
	if kerr := wantStatus(t, err, StatusInvalidArgument); !strings.Contains(kerr.Message, "target") {
		t.Errorf("closed target: message %q", kerr.Message)
	}
	spec.Close()
}

// The model's own multi-token-prediction block: KOLIBRI_TEST_MODEL_MTP (a Qwen3.5 file with
// one, e.g. the synthetic qwen35-mtp-agree-tiny) loaded with its block drafts, alone and after
// prompt lookup, and greedy output stays plain greedy's; without the block it is refused.
func TestSpeculatorMTP(t *testing.T) {
	path := os.Getenv("KOLIBRI_TEST_MODEL_MTP")
	if path == "" {
		t.Skip("KOLIBRI_TEST_MODEL_MTP is not set")
	}
	m, err := LoadModel(path, &ModelOptions{MTPBlocks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ownDrafterKeepsGreedy(t, m, func(ctx *Context, p *SpeculatorParams, lookup bool) (*Speculator, error) {
		return NewMTPSpeculator(ctx, p, lookup)
	})

	plain, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, err := NewContext(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	_, err = NewMTPSpeculator(ctx, nil, false)
	wantStatus(t, err, StatusInvalidArgument)
}

// Gemma 4's assistant: KOLIBRI_TEST_MODEL_GEMMA4 and KOLIBRI_TEST_ASSISTANT (e.g. the synthetic
// gemma4-tiny and gemma4-assistant-tiny) draft, alone and after prompt lookup, and greedy output
// stays plain greedy's; the assistant is refused for another model, and a model file as one.
func TestSpeculatorAssistant(t *testing.T) {
	targetPath, path := os.Getenv("KOLIBRI_TEST_MODEL_GEMMA4"), os.Getenv("KOLIBRI_TEST_ASSISTANT")
	if targetPath == "" || path == "" {
		t.Skip("KOLIBRI_TEST_MODEL_GEMMA4 or KOLIBRI_TEST_ASSISTANT is not set")
	}
	m, err := LoadModel(targetPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, err := LoadAssistant(m, path)
	if err != nil {
		t.Fatal(err)
	}
	ownDrafterKeepsGreedy(t, m, func(ctx *Context, p *SpeculatorParams, lookup bool) (*Speculator, error) {
		return NewAssistantSpeculator(ctx, a, p, lookup)
	})
	a.Close()
	_, err = NewAssistantSpeculator(nil, a, nil, false)
	wantStatus(t, err, StatusInvalidArgument)
	_, err = LoadAssistant(m, targetPath)
	wantStatus(t, err, StatusInvalidArgument)
	other, err := LoadModel(os.Getenv("KOLIBRI_TEST_MODEL"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = LoadAssistant(other, path)
	wantStatus(t, err, StatusInvalidArgument)
}

// ownDrafterKeepsGreedy checks that speculators made by newSpec on m, alone and after prompt
// lookup, draft and give plain greedy's tokens.
func ownDrafterKeepsGreedy(t *testing.T, m *Model, newSpec func(*Context, *SpeculatorParams, bool) (*Speculator, error)) {
	t.Helper()
	prompt, err := m.Tokenize("Once upon a time, in a small village", true, false)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	want := plainGreedy(t, m, prompt, n)
	for _, lookup := range []bool{false, true} {
		ctx, err := NewContext(m, &ContextOptions{NCtx: 256})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := newSpec(ctx, &SpeculatorParams{MaxDraft: 4, DraftPMin: 0.5, LookupNgram: 4}, lookup)
		if err != nil {
			t.Fatal(err)
		}
		s := greedySampler(t)
		if err := ctx.Eval(prompt); err != nil {
			t.Fatal(err)
		}
		if err := spec.Prepare(); err != nil {
			t.Fatal(err)
		}
		pending, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := []Token{pending}
		for len(got) < n {
			toks, err := spec.Step(s, pending)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, toks...)
			pending = toks[len(toks)-1]
		}
		if !equalTokens(got[:n], want[:n]) {
			t.Errorf("lookup %v: speculative greedy %v\nplain greedy %v", lookup, got[:n], want)
		}
		st, err := spec.Stats()
		if err != nil || st.Drafted == 0 {
			t.Errorf("lookup %v: stats %+v (%v): nothing drafted", lookup, st, err)
		}
		spec.Close()
		s.Close()
		ctx.Close()
	}
}
