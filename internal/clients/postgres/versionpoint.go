package postgres

import "sync/atomic"

// A version point is a place where the SQL the provider runs, or what it
// expects of the server, is chosen by the server's major version. The test
// harness listens to them: a test that says what it proves does not depend
// on the major runs on one major only, and the harness fails a package whose
// version points such a test reaches and no test run on every major does.
// Every branch on a major calls versionPoint with the name of its place.

var versionPointHook atomic.Pointer[func(point string)]

// SetVersionPointHook makes fn hear every version point reached (nil: none,
// as outside tests).
func SetVersionPointHook(fn func(point string)) {
	if fn == nil {
		versionPointHook.Store(nil)
		return
	}
	versionPointHook.Store(&fn)
}

func versionPoint(point string) {
	if fn := versionPointHook.Load(); fn != nil {
		(*fn)(point)
	}
}
