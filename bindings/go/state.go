package kolibri

/*
#include <stdlib.h>
#include <kolibri.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// SaveState returns the context's state: its tokens, KV cache and last logits. The bytes name
// the model, the format version and carry a checksum; LoadState on a context of the same
// model and KV cache types continues exactly where this one is.
func (c *Context) SaveState() ([]byte, error) {
	p, err := c.handle()
	if err != nil {
		return nil, err
	}
	var size C.size_t
	err = call(func() C.kolibri_status { return C.kolibri_context_state_size(p, &size) })
	if err != nil {
		return nil, err
	}
	buf := make([]byte, int(size))
	var written C.size_t
	err = call(func() C.kolibri_status {
		return C.kolibri_context_state_save(p, (*C.uint8_t)(unsafe.Pointer(&buf[0])), size, &written)
	})
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return buf[:int(written)], nil
}

// LoadState replaces the context's contents with a state from SaveState. A state that does
// not fit (truncated, corrupted, another model's or KV cache type's) fails with
// StatusBadState and leaves the context as it was.
func (c *Context) LoadState(state []byte) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	var ptr *C.uint8_t
	if len(state) > 0 {
		ptr = (*C.uint8_t)(unsafe.Pointer(&state[0]))
	}
	err = call(func() C.kolibri_status {
		return C.kolibri_context_state_load(p, ptr, C.size_t(len(state)))
	})
	runtime.KeepAlive(c)
	runtime.KeepAlive(state)
	return err
}

// SaveStateFile writes SaveState's bytes to path (whole or not at all).
func (c *Context) SaveStateFile(path string) error {
	return c.withPath(path, func(p *C.kolibri_context, cpath *C.char) C.kolibri_status {
		return C.kolibri_context_state_save_file(p, cpath)
	})
}

// LoadStateFile is LoadState from a file written by SaveStateFile.
func (c *Context) LoadStateFile(path string) error {
	return c.withPath(path, func(p *C.kolibri_context, cpath *C.char) C.kolibri_status {
		return C.kolibri_context_state_load_file(p, cpath)
	})
}

func (c *Context) withPath(path string, f func(*C.kolibri_context, *C.char) C.kolibri_status) error {
	p, err := c.handle()
	if err != nil {
		return err
	}
	cpath, err := cString("path", path)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cpath))
	err = call(func() C.kolibri_status { return f(p, cpath) })
	runtime.KeepAlive(c)
	return err
}

// Tokens returns the tokens the context holds, in position order (after LoadState: the
// saved ones).
func (c *Context) Tokens() ([]Token, error) {
	p, err := c.handle()
	if err != nil {
		return nil, err
	}
	var n C.size_t
	err = call(func() C.kolibri_status { return C.kolibri_context_size(p, &n, nil) })
	if err != nil {
		return nil, err
	}
	toks := make([]Token, int(n)+1) // one spare: never an empty buffer
	err = call(func() C.kolibri_status {
		return C.kolibri_context_tokens(p, (*C.int32_t)(unsafe.Pointer(&toks[0])), C.size_t(len(toks)), &n)
	})
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return toks[:n], nil
}
