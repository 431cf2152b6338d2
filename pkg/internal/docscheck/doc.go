// Package docscheck is a test only: it keeps the README and docs/ usable
// from a clone. Code and docs cite docs/design.md by anchor, never a
// design section number or an issue number that a clone cannot follow;
// the README fits on two screens, links every doc and lists every
// directory under cmd/ and pkg/ in its layout; docs/README.md indexes
// every doc; every relative link of the README and docs/ resolves.
package docscheck
