// Package docs keeps the project's documentation true of its code: its
// tests regenerate docs/DESIGN.md's package table (each package, what its
// doc comment says it does, and the internal packages it imports) from the
// source and fail when the file differs (go test ./internal/docs -update
// rewrites it).
package docs
