// Package archtest holds the architecture test: it proves the import rules
// of docs/architecture.md from the module's import graph (go list -deps)
// and the syntax of the state machine's packages, and fails when an arrow
// breaks or a package has no place in its table or no row in the
// document's Packages table. It has no code outside its tests.
package archtest
