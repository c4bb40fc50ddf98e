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

// Assistant is Gemma 4's assistant drafter (a gemma4-assistant file), loaded for one target
// model; NewAssistantSpeculator drafts with it. It keeps no KV cache: it reads the target
// context's. Safe for concurrent use.
type Assistant struct {
	ptr *C.kolibri_assistant
}

// LoadAssistant loads the assistant file at path for target, checking that it belongs to it
// (StatusInvalidArgument for a file that is not an assistant, or an assistant for another
// model).
func LoadAssistant(target *Model, path string) (*Assistant, error) {
	mp, err := target.handle()
	if err != nil {
		return nil, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ptr *C.kolibri_assistant
	err = call(func() C.kolibri_status { return C.kolibri_assistant_load(mp, cpath, &ptr) })
	runtime.KeepAlive(target)
	if err != nil {
		return nil, err
	}
	a := &Assistant{ptr: ptr}
	runtime.SetFinalizer(a, (*Assistant).Close)
	return a, nil
}

// Close frees the assistant; speculators created from it stay usable. Closing twice is a
// no-op.
func (a *Assistant) Close() error {
	if a.ptr != nil {
		C.kolibri_assistant_free(a.ptr)
		a.ptr = nil
		runtime.SetFinalizer(a, nil)
	}
	return nil
}

func (a *Assistant) handle() (*C.kolibri_assistant, error) {
	if a == nil || a.ptr == nil {
		return nil, errInvalid("assistant is closed")
	}
	return a.ptr, nil
}
