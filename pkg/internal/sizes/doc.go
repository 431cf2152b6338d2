// Package sizes holds only a test: it keeps Courier's code readable by
// failing `make test` when a function in pkg/ grows past 80 lines or a file
// past 500 (tests and generated code aside), unless its allow-list names
// the exception and why. A long function is usually several
// decisions in one body; splitting it into functions named for those
// decisions is what lets a reader find the one they need.
package sizes
