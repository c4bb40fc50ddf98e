package kolibri

/*
#include <kolibri.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// SpeculatorParams configures a Speculator. Start from DefaultSpeculatorParams: the library's
// defaults are not the zero value (a zero MaxDraft or LookupNgram is refused).
type SpeculatorParams struct {
	MaxDraft    uint32  // most tokens drafted per step, 1..32 (fewer when they do not pay)
	DraftPMin   float32 // a draft model's draft ends at a token it gives less probability, 0..1
	LookupNgram uint32  // prompt lookup matches the last 1..LookupNgram tokens, 1..16
}

// DefaultSpeculatorParams returns the library's defaults (from
// kolibri_speculator_params_init): MaxDraft 16, DraftPMin 0.5, LookupNgram 4.
func DefaultSpeculatorParams() SpeculatorParams {
	var p C.kolibri_speculator_params
	C.kolibri_speculator_params_init(&p, C.size_t(unsafe.Sizeof(p)))
	return SpeculatorParams{
		MaxDraft:    uint32(p.max_draft),
		DraftPMin:   float32(p.draft_p_min),
		LookupNgram: uint32(p.lookup_ngram),
	}
}

// SpeculatorStats is what speculation achieved so far.
type SpeculatorStats struct {
	Drafted      uint64 // tokens drafted and checked by the target
	Accepted     uint64 // of those, the ones the target agreed with
	TargetPasses uint64 // target forward passes (one per Step)
	Generated    uint64 // tokens returned by the steps
}

// Speculator decodes speculatively on a target context: each Step drafts a few tokens, checks
// them all in one pass of the target and returns the tokens the target agrees with plus the
// one it chose next. Greedy output is exactly plain decoding's; sampled output keeps the
// target's distribution.
//
// It drafts with a draft context (a smaller model with the target's vocabulary), with the
// target model's own multi-token-prediction block (NewMTPSpeculator) or its assistant
// (NewAssistantSpeculator), or by prompt lookup
// (matching the last tokens against the sequence so far). The speculator references its
// contexts and passes them to every step; they stay the caller's to close. Use a Speculator,
// its contexts and the sampler from one goroutine at a time.
type Speculator struct {
	ptr    *C.kolibri_speculator
	target *Context
	draft  *Context // nil: prompt lookup, or the model's own drafter
	// maxDraft is the params' max_draft: a step returns at most maxDraft + 1 tokens.
	maxDraft int
}

// NewSpeculator creates a speculator for target's sequence. draft is nil for prompt lookup;
// otherwise its model must share the target's vocabulary token by token and be smaller, and
// it must hold as many positions as target (StatusInvalidArgument if not). params may be nil
// for DefaultSpeculatorParams.
func NewSpeculator(target, draft *Context, params *SpeculatorParams) (*Speculator, error) {
	tp, err := target.handle()
	if err != nil {
		return nil, err
	}
	var dp *C.kolibri_context // NULL: prompt lookup
	if draft != nil {
		if draft == target {
			return nil, errInvalid("the draft context is the target context")
		}
		if dp, err = draft.handle(); err != nil {
			return nil, &Error{Status: StatusInvalidArgument, Message: "draft context is closed"}
		}
	}
	p := cSpeculatorParams(params)
	var ptr *C.kolibri_speculator
	err = call(func() C.kolibri_status { return C.kolibri_speculator_new(tp, dp, &p, &ptr) })
	runtime.KeepAlive(target)
	runtime.KeepAlive(draft)
	if err != nil {
		return nil, err
	}
	s := &Speculator{ptr: ptr, target: target, draft: draft, maxDraft: int(p.max_draft)}
	runtime.SetFinalizer(s, (*Speculator).Close)
	return s, nil
}

// NewMTPSpeculator creates a speculator for target's sequence that drafts with the target
// model's own multi-token-prediction block (a model loaded with ModelOptions.MTPBlocks 1;
// StatusInvalidArgument otherwise) and, with lookup, by prompt lookup first. From now on
// target keeps the hidden states the block reads. Call Prepare after each Eval of the prompt.
// params may be nil for DefaultSpeculatorParams (DraftPMin is not used).
func NewMTPSpeculator(target *Context, params *SpeculatorParams, lookup bool) (*Speculator, error) {
	return newOwnSpeculator(target, params, func(tp *C.kolibri_context, p *C.kolibri_speculator_params, out **C.kolibri_speculator) C.kolibri_status {
		return C.kolibri_speculator_new_mtp(tp, p, C.bool(lookup), out)
	})
}

// NewAssistantSpeculator creates a speculator for target's sequence that drafts with
// assistant (loaded for target's model; StatusInvalidArgument otherwise) and, with lookup, by
// prompt lookup first. From now on target keeps the hidden states the assistant reads. Call
// Prepare after each Eval of the prompt. params may be nil for DefaultSpeculatorParams
// (DraftPMin is not used). The speculator keeps what it needs: assistant may be closed.
func NewAssistantSpeculator(target *Context, assistant *Assistant, params *SpeculatorParams, lookup bool) (*Speculator, error) {
	ap, err := assistant.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(assistant)
	return newOwnSpeculator(target, params, func(tp *C.kolibri_context, p *C.kolibri_speculator_params, out **C.kolibri_speculator) C.kolibri_status {
		return C.kolibri_speculator_new_assistant(tp, ap, p, C.bool(lookup), out)
	})
}

// newOwnSpeculator creates a speculator drafting with the target model's own drafter, made by
// create.
func newOwnSpeculator(target *Context, params *SpeculatorParams, create func(*C.kolibri_context, *C.kolibri_speculator_params, **C.kolibri_speculator) C.kolibri_status) (*Speculator, error) {
	tp, err := target.handle()
	if err != nil {
		return nil, err
	}
	p := cSpeculatorParams(params)
	var ptr *C.kolibri_speculator
	err = call(func() C.kolibri_status { return create(tp, &p, &ptr) })
	runtime.KeepAlive(target)
	if err != nil {
		return nil, err
	}
	s := &Speculator{ptr: ptr, target: target, maxDraft: int(p.max_draft)}
	runtime.SetFinalizer(s, (*Speculator).Close)
	return s, nil
}

// cSpeculatorParams is params (nil: the defaults) as the C API takes them.
func cSpeculatorParams(params *SpeculatorParams) C.kolibri_speculator_params {
	var p C.kolibri_speculator_params
	C.kolibri_speculator_params_init(&p, C.size_t(unsafe.Sizeof(p)))
	if params != nil {
		p.max_draft = C.uint32_t(params.MaxDraft)
		p.draft_p_min = C.float(params.DraftPMin)
		p.lookup_ngram = C.uint32_t(params.LookupNgram)
	}
	return p
}

// Prepare brings the drafter up to what the target holds: a draft context reads the prompt
// now (as prompt processing) rather than in the first Step; the model's own block reads what
// the target's last Eval evaluated (call it after each Eval of the prompt). Prompt lookup has
// nothing to do.
func (s *Speculator) Prepare() error {
	p, err := s.handle()
	if err != nil {
		return err
	}
	tp, err := s.target.handle()
	if err != nil {
		return &Error{Status: StatusInvalidArgument, Message: "the speculator's target context is closed"}
	}
	var dp *C.kolibri_context
	if s.draft != nil {
		if dp, err = s.draft.handle(); err != nil {
			return &Error{Status: StatusInvalidArgument, Message: "the speculator's draft context is closed"}
		}
	}
	err = call(func() C.kolibri_status { return C.kolibri_speculator_prepare(p, tp, dp) })
	runtime.KeepAlive(s)
	return err
}

// Close frees the speculator (its contexts stay the caller's). Calling Close again does
// nothing.
func (s *Speculator) Close() error {
	if s.ptr != nil {
		C.kolibri_speculator_free(s.ptr)
		s.ptr = nil
		s.target, s.draft = nil, nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

func (s *Speculator) handle() (*C.kolibri_speculator, error) {
	if s == nil || s.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "speculator is closed"}
	}
	return s.ptr, nil
}

// Target returns the context the speculator decodes on.
func (s *Speculator) Target() *Context { return s.target }

// Draft returns the draft context, or nil (prompt lookup, the model's own block).
func (s *Speculator) Draft() *Context { return s.draft }

// Step runs one speculative step after pending, the token last sampled (by Sampler.Sample or
// an earlier Step) and not yet evaluated. It returns the tokens generated: at least one, at
// most MaxDraft+1. The last is the new pending token; the others are in the target context
// now, and the sampler has accepted all of them. A step stops after an end-of-generation
// token. Afterwards the target has no logits: continue with another Step, or Eval the
// pending token. On error (StatusContextFull: no room for the pending token,
// StatusInvalidToken, StatusCancelled, ...) the contexts and the sampler are as before.
func (s *Speculator) Step(sampler *Sampler, pending Token) ([]Token, error) {
	p, err := s.handle()
	if err != nil {
		return nil, err
	}
	tp, err := s.target.handle()
	if err != nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "the speculator's target context is closed"}
	}
	var dp *C.kolibri_context
	if s.draft != nil {
		if dp, err = s.draft.handle(); err != nil {
			return nil, &Error{Status: StatusInvalidArgument, Message: "the speculator's draft context is closed"}
		}
	}
	sp, err := sampler.handle()
	if err != nil {
		return nil, err
	}
	// A fresh buffer per step: the returned slice is the caller's.
	out := make([]Token, s.maxDraft+1)
	var n C.size_t
	err = call(func() C.kolibri_status {
		return C.kolibri_speculator_step(p, tp, dp, sp, C.int32_t(pending),
			(*C.int32_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(sampler)
	if err != nil {
		return nil, err
	}
	return out[:n:n], nil
}

// Stats returns what the speculator achieved so far.
func (s *Speculator) Stats() (SpeculatorStats, error) {
	p, err := s.handle()
	if err != nil {
		return SpeculatorStats{}, err
	}
	var st C.kolibri_speculator_stats
	err = call(func() C.kolibri_status { return C.kolibri_speculator_get_stats(p, &st) })
	runtime.KeepAlive(s)
	if err != nil {
		return SpeculatorStats{}, err
	}
	return SpeculatorStats{
		Drafted:      uint64(st.drafted),
		Accepted:     uint64(st.accepted),
		TargetPasses: uint64(st.target_passes),
		Generated:    uint64(st.generated),
	}, nil
}
