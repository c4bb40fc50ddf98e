package kolibri

/*
#include <kolibri.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// SamplerParams configures a Sampler. Start from DefaultSamplerParams: the library's
// defaults are not the zero value. The pipeline is penalties, then (unless greedy) top-k,
// top-p, min-p, temperature and a seeded random draw.
type SamplerParams struct {
	Temperature      float32 // <= 0 means greedy (always the highest logit)
	TopK             int32   // 0 = off
	TopP             float32 // 1 = off
	MinP             float32 // 0 = off
	RepeatPenalty    float32 // 1 = off
	FrequencyPenalty float32 // 0 = off
	PresencePenalty  float32 // 0 = off
	PenaltyLastN     int32   // recent tokens the penalties see; 0 disables them
	Seed             uint64  // same seed, params and logits give the same tokens
}

// DefaultSamplerParams returns the library's defaults (from kolibri_sampler_params_init).
func DefaultSamplerParams() SamplerParams {
	var p C.kolibri_sampler_params
	C.kolibri_sampler_params_init(&p, C.size_t(unsafe.Sizeof(p)))
	return SamplerParams{
		Temperature:      float32(p.temperature),
		TopK:             int32(p.top_k),
		TopP:             float32(p.top_p),
		MinP:             float32(p.min_p),
		RepeatPenalty:    float32(p.repeat_penalty),
		FrequencyPenalty: float32(p.frequency_penalty),
		PresencePenalty:  float32(p.presence_penalty),
		PenaltyLastN:     int32(p.penalty_last_n),
		Seed:             uint64(p.seed),
	}
}

// Sampler picks tokens from a context's logits. Use it from one goroutine at a time.
type Sampler struct {
	ptr *C.kolibri_sampler
}

// NewSampler creates a sampler; params may be nil for DefaultSamplerParams.
func NewSampler(params *SamplerParams) (*Sampler, error) {
	var p C.kolibri_sampler_params
	C.kolibri_sampler_params_init(&p, C.size_t(unsafe.Sizeof(p)))
	if params != nil {
		p.temperature = C.float(params.Temperature)
		p.top_k = C.int32_t(params.TopK)
		p.top_p = C.float(params.TopP)
		p.min_p = C.float(params.MinP)
		p.repeat_penalty = C.float(params.RepeatPenalty)
		p.frequency_penalty = C.float(params.FrequencyPenalty)
		p.presence_penalty = C.float(params.PresencePenalty)
		p.penalty_last_n = C.int32_t(params.PenaltyLastN)
		p.seed = C.uint64_t(params.Seed)
	}
	var ptr *C.kolibri_sampler
	if err := call(func() C.kolibri_status { return C.kolibri_sampler_new(&p, &ptr) }); err != nil {
		return nil, err
	}
	s := &Sampler{ptr: ptr}
	runtime.SetFinalizer(s, (*Sampler).Close)
	return s, nil
}

// Close frees the sampler. Calling Close again does nothing.
func (s *Sampler) Close() error {
	if s.ptr != nil {
		C.kolibri_sampler_free(s.ptr)
		s.ptr = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

func (s *Sampler) handle() (*C.kolibri_sampler, error) {
	if s == nil || s.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "sampler is closed"}
	}
	return s.ptr, nil
}

// Sample picks the next token from the logits of ctx's last evaluated position and accepts
// it (the penalties will see it). Feed it back with ctx.Eval.
func (s *Sampler) Sample(ctx *Context) (Token, error) {
	sp, err := s.handle()
	if err != nil {
		return 0, err
	}
	cp, err := ctx.handle()
	if err != nil {
		return 0, err
	}
	var tok C.int32_t
	err = call(func() C.kolibri_status { return C.kolibri_sampler_sample(sp, cp, &tok) })
	runtime.KeepAlive(s)
	runtime.KeepAlive(ctx)
	return Token(tok), err
}

// Accept records a token the penalties should count without it having been sampled (the
// prompt, or a token chosen by the caller).
func (s *Sampler) Accept(token Token) error {
	sp, err := s.handle()
	if err != nil {
		return err
	}
	err = call(func() C.kolibri_status { return C.kolibri_sampler_accept(sp, C.int32_t(token)) })
	runtime.KeepAlive(s)
	return err
}

// Reset forgets the accepted tokens and restarts the random generator from the seed.
func (s *Sampler) Reset() error {
	sp, err := s.handle()
	if err != nil {
		return err
	}
	err = call(func() C.kolibri_status { return C.kolibri_sampler_reset(sp) })
	runtime.KeepAlive(s)
	return err
}
