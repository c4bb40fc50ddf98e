package kolibri

// This file holds only the exported callback: a file with //export may not define C
// functions in its preamble, so the helpers that use it live in model.go.

/*
#include <stdbool.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// progressState is what the cgo.Handle passed as user_data refers to during one load.
type progressState struct {
	fn       func(progress float32) bool
	panicked any // a panic from fn, re-raised by LoadModel once C has returned
}

// kolibriGoProgress is the kolibri_progress_callback for every Go load. A panic must not
// unwind through the library's frames, so it is caught here, cancels the load, and is
// re-raised on the Go side.
//
//export kolibriGoProgress
func kolibriGoProgress(progress C.float, userData unsafe.Pointer) (keepGoing C.bool) {
	st := cgo.Handle(uintptr(userData)).Value().(*progressState)
	defer func() {
		if r := recover(); r != nil {
			st.panicked = r
			keepGoing = false
		}
	}()
	return C.bool(st.fn(float32(progress)))
}
