// Package layout holds no code: its tests check the shape of the code
// under internal/ that a reader relies on when adding to it. No function
// is so long that its concern cannot be seen at once, and no controller
// imports a sibling controller (what two controllers share lives in a
// neutral package such as internal/memo).
package layout
