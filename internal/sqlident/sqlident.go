// Package sqlident checks the SQL identifiers the outbox and the inbox
// splice into SQL text (table names), which therefore cannot be passed as
// query parameters.
package sqlident

// Valid reports whether name is a plain SQL identifier of at most max
// bytes: ASCII letters, digits and underscores, not starting with a
// digit. Nothing else is accepted, so a valid name needs no quoting.
func Valid(name string, max int) bool {
	if name == "" || len(name) > max || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
