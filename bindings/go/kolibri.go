// Package kolibri binds the C API of Kolibri, a CPU inference engine for GGUF language
// models, through cgo.
//
// The library is found with pkg-config (package "kolibri"); at run time libkolibri.so must
// be on the loader's path (LD_LIBRARY_PATH, or an installed prefix).
//
// A Model is immutable and may be shared by any number of goroutines. A Context or Sampler is
// used by one goroutine at a time (a concurrent call fails with StatusInvalidState). Every
// handle has an idempotent Close; a finalizer frees handles that were never closed, but
// closing explicitly releases memory (a model can be hundreds of MiB) at a known time. Close
// must not race with other calls on the same value.
package kolibri

/*
#cgo pkg-config: kolibri
#include <stdlib.h>
#include <kolibri.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Status is a kolibri_status code. The numbers are fixed by the C API and never reused.
type Status int32

// The statuses of the C API (see kolibri.h for when each is returned).
const (
	StatusOK              Status = C.KOLIBRI_STATUS_OK
	StatusInvalidArgument Status = C.KOLIBRI_STATUS_INVALID_ARGUMENT
	StatusBufferTooSmall  Status = C.KOLIBRI_STATUS_BUFFER_TOO_SMALL
	StatusIO              Status = C.KOLIBRI_STATUS_IO
	StatusInvalidModel    Status = C.KOLIBRI_STATUS_INVALID_MODEL
	StatusUnsupported     Status = C.KOLIBRI_STATUS_UNSUPPORTED
	StatusInvalidToken    Status = C.KOLIBRI_STATUS_INVALID_TOKEN
	StatusContextFull     Status = C.KOLIBRI_STATUS_CONTEXT_FULL
	StatusCancelled       Status = C.KOLIBRI_STATUS_CANCELLED
	StatusNotFound        Status = C.KOLIBRI_STATUS_NOT_FOUND
	StatusTemplateError   Status = C.KOLIBRI_STATUS_TEMPLATE_ERROR
	StatusInvalidState    Status = C.KOLIBRI_STATUS_INVALID_STATE
	StatusOutOfMemory     Status = C.KOLIBRI_STATUS_OUT_OF_MEMORY
	StatusInternal        Status = C.KOLIBRI_STATUS_INTERNAL
	StatusPanic           Status = C.KOLIBRI_STATUS_PANIC
	StatusBadState        Status = C.KOLIBRI_STATUS_BAD_STATE
)

// String returns the library's English name for the status ("invalid argument", ...).
func (s Status) String() string {
	return C.GoString(C.kolibri_status_string(C.int32_t(s)))
}

// Error is a failed Kolibri call: its status and the library's message for it.
type Error struct {
	Status  Status
	Message string
}

// Error formats the error as "kolibri: <status>: <message>".
func (e *Error) Error() string {
	if e.Message == "" {
		return "kolibri: " + e.Status.String()
	}
	return "kolibri: " + e.Status.String() + ": " + e.Message
}

// Token is a token id of a model's vocabulary.
type Token int32

// lastError builds the Error for a failed status. It must run on the OS thread that made the
// failing call, because kolibri_last_error is thread-local.
func lastError(st C.kolibri_status) error {
	if st == C.KOLIBRI_STATUS_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.kolibri_last_error())}
}

// call runs one C call with the goroutine pinned to its OS thread, so that a failure's
// message is read on the thread that failed rather than wherever the goroutine moved.
func call(f func() C.kolibri_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return lastError(f())
}

// errInvalid reports a misuse the Go side detects before calling C.
func errInvalid(format string, args ...any) error {
	return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// fillFunc is a C call using the (buf, capacity, *len) convention.
type fillFunc func(buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status

// getBytes asks for the size with (NULL, 0), then fills a buffer of len+1 bytes (the text
// plus its NUL). It loops in case the size grew in between, which the API allows in principle.
func getBytes(f fillFunc) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n C.size_t
	st := f(nil, 0, &n)
	for attempt := 0; st == C.KOLIBRI_STATUS_BUFFER_TOO_SMALL && attempt < 4; attempt++ {
		buf := make([]byte, int(n)+1)
		st = f((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
		if st == C.KOLIBRI_STATUS_OK {
			return buf[:n], nil
		}
	}
	if st == C.KOLIBRI_STATUS_OK { // nothing to write (not expected for NUL-terminated text)
		return []byte{}, nil
	}
	return nil, lastError(st)
}

// getString is getBytes for UTF-8 text.
func getString(f fillFunc) (string, error) {
	b, err := getBytes(f)
	return string(b), err
}

// cString copies s into C memory (free it with C.free); C strings cannot hold NUL bytes, so a
// string containing one is refused instead of being silently cut short.
func cString(what, s string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errInvalid("%s contains a NUL byte", what)
	}
	return C.CString(s), nil
}

// Version returns the library's version, "MAJOR.MINOR.PATCH".
func Version() string {
	return C.GoString(C.kolibri_version())
}

// HeaderVersion returns the version of kolibri.h this package was compiled against; compare
// it with Version to detect a header/library mismatch.
func HeaderVersion() string {
	return fmt.Sprintf("%d.%d.%d", C.KOLIBRI_VERSION_MAJOR, C.KOLIBRI_VERSION_MINOR, C.KOLIBRI_VERSION_PATCH)
}

// SystemInfo describes the machine as Kolibri sees it: CPU features and the kernels chosen.
func SystemInfo() (string, error) {
	return getString(func(buf *C.char, capacity C.size_t, n *C.size_t) C.kolibri_status {
		return C.kolibri_system_info(buf, capacity, n)
	})
}
