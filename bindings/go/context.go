package kolibri

/*
#include <kolibri.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// KVType is how a context's KV cache stores keys or values.
type KVType int32

const (
	// KVF16 stores 16-bit floats (the default).
	KVF16 KVType = C.KOLIBRI_KV_TYPE_F16
	// KVQ8_0 stores Q8_0 blocks: about half of f16's memory.
	KVQ8_0 KVType = C.KOLIBRI_KV_TYPE_Q8_0
	// KVQ4_0 stores Q4_0 blocks.
	KVQ4_0 KVType = C.KOLIBRI_KV_TYPE_Q4_0
)

// ContextOptions configures NewContext. Zero fields mean the library's defaults.
type ContextOptions struct {
	// NCtx is the number of positions; 0 means 4096, or the trained context if smaller.
	NCtx uint32
	// Threads is the worker count; 0 means the model's ModelOptions.Threads.
	Threads uint32
	// Batch is the most tokens per forward pass; 0 means 512.
	Batch uint32
	// TypeK and TypeV are how the KV cache stores keys and values (KVF16 by default).
	TypeK, TypeV KVType
}

// Context is one sequence being evaluated: its KV cache and the last logits. Use it from one
// goroutine at a time. Contexts on the same model run concurrently.
type Context struct {
	ptr *C.kolibri_context
	// model keeps the Model (and so its finalizer) alive while the context lives. The C
	// library also keeps the weights alive on its own; this makes the Go side not rely on it.
	model *Model
}

// NewContext creates an empty context on model. opts may be nil for the defaults.
func NewContext(model *Model, opts *ContextOptions) (*Context, error) {
	mp, err := model.handle()
	if err != nil {
		return nil, err
	}
	var params C.kolibri_context_params
	C.kolibri_context_params_init(&params, C.size_t(unsafe.Sizeof(params)))
	if opts != nil {
		params.n_ctx = C.uint32_t(opts.NCtx)
		params.n_threads = C.uint32_t(opts.Threads)
		params.n_batch = C.uint32_t(opts.Batch)
		params.type_k = C.kolibri_kv_type(opts.TypeK)
		params.type_v = C.kolibri_kv_type(opts.TypeV)
	}
	var ptr *C.kolibri_context
	err = call(func() C.kolibri_status { return C.kolibri_context_new(mp, &params, &ptr) })
	runtime.KeepAlive(model)
	if err != nil {
		return nil, err
	}
	c := &Context{ptr: ptr, model: model}
	runtime.SetFinalizer(c, (*Context).Close)
	return c, nil
}

// Close frees the context and its worker threads. Calling Close again does nothing.
func (c *Context) Close() error {
	if c.ptr != nil {
		C.kolibri_context_free(c.ptr)
		c.ptr = nil
		c.model = nil
		runtime.SetFinalizer(c, nil)
	}
	return nil
}

// Model returns the model the context was created on.
func (c *Context) Model() *Model { return c.model }

func (c *Context) handle() (*C.kolibri_context, error) {
	if c == nil || c.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "context is closed"}
	}
	return c.ptr, nil
}

// Eval evaluates tokens at the context's next positions and keeps the logits of the last
// one. On failure (StatusInvalidToken, StatusContextFull, ...) the context is unchanged.
func (c *Context) Eval(tokens []Token) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	var ptr *C.int32_t
	if len(tokens) > 0 {
		ptr = (*C.int32_t)(unsafe.Pointer(&tokens[0]))
	}
	err = call(func() C.kolibri_status { return C.kolibri_context_eval(p, ptr, C.size_t(len(tokens))) })
	runtime.KeepAlive(c)
	runtime.KeepAlive(tokens)
	return err
}

// Logits returns a copy of the scores of the last evaluated position, one per vocabulary
// entry. It fails with StatusInvalidState before the first Eval or after Rewind.
func (c *Context) Logits() ([]float32, error) {
	p, err := c.handle()
	if err != nil {
		return nil, err
	}
	var data *C.float
	var n C.size_t
	err = call(func() C.kolibri_status { return C.kolibri_context_logits(p, &data, &n) })
	if err != nil {
		runtime.KeepAlive(c)
		return nil, err
	}
	// The C array lives in the context until its next eval, rewind or free: copy it now.
	out := make([]float32, int(n))
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(data)), int(n)))
	runtime.KeepAlive(c)
	return out, nil
}

// Rewind keeps the first nKeep tokens and forgets the rest; evaluation continues at
// position nKeep. The logits are cleared until the next Eval.
func (c *Context) Rewind(nKeep int) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	if nKeep < 0 {
		return errInvalid("nKeep is negative (%d)", nKeep)
	}
	err = call(func() C.kolibri_status { return C.kolibri_context_rewind(p, C.size_t(nKeep)) })
	runtime.KeepAlive(c)
	return err
}

// Size returns the number of tokens the context holds and the most it can hold.
func (c *Context) Size() (nTokens, nCtx int, err error) {
	p, err := c.handle()
	if err != nil {
		return 0, 0, err
	}
	var held, capacity C.size_t
	err = call(func() C.kolibri_status { return C.kolibri_context_size(p, &held, &capacity) })
	runtime.KeepAlive(c)
	return int(held), int(capacity), err
}
