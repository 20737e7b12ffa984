package postgres

// UnpinCleanupSearchPath makes the access cleanup's session inside a
// tenant database run under the search_path the tenant set, until the
// returned function is called: the schema qualification of its statements
// is then all that keeps the tenant's functions and operators out.
func UnpinCleanupSearchPath() (restore func()) {
	insideSearchPath = ""
	return func() { insideSearchPath = SafeSearchPath }
}
