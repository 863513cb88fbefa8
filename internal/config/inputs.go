package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxBaselineBytes bounds one baseline bench.txt: a run's is kilobytes (a
// few hundred benchfmt lines), so 64 MiB is thousands of runs' worth. A
// bigger file is not a bench.txt (a log, a core dump, a disk image), and
// package gate reads each file whole (and no more than this).
const MaxBaselineBytes = 64 << 20

// wantBaseline says what a baseline entry must be.
const wantBaseline = "want a bench.txt file or a directory of runs"

// BaselineEntries splits a baseline setting into its entries, as config
// load and package gate read it: at commas and the OS's path-list
// separator (":" on Unix), each entry trimmed, blank ones dropped.
func BaselineEntries(spec string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == os.PathListSeparator }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// BaselineGlobs are the runs a baseline directory holds (config load
// checks them, package gate's LoadBaseline reads them): its own bench.txt,
// its subdirectories' (one out_dir per run) and its *.bench.txt files.
func BaselineGlobs() []string { return []string{"bench.txt", "*/bench.txt", "*.bench.txt"} }

// checkBaseline checks the baseline setting: each entry a bench.txt file
// of at most MaxBaselineBytes or a directory holding such runs. Only
// os.Stat looks at an entry (opening a FIFO would wait for a writer);
// "" is no gate, a setting of separators and blanks alone names no file.
func checkBaseline(bad badFunc, spec string) {
	entries := BaselineEntries(spec)
	if spec != "" && len(entries) == 0 {
		bad("baseline", "%q names no file: %s (comma-separated), or leave it empty for no regression gate", spec, wantBaseline)
	}
	for _, e := range entries {
		fi, err := os.Stat(e)
		if err != nil {
			bad("baseline", "%v (a previous run's bench.txt, or a directory of runs)", err)
			continue
		}
		if !fi.IsDir() {
			checkBench(bad, e, fi)
			continue
		}
		var found []string
		for _, pat := range BaselineGlobs() {
			m, err := filepath.Glob(filepath.Join(e, pat))
			if err != nil {
				bad("baseline", "%s: %v", e, err)
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			bad("baseline", "%s: a directory with no bench.txt, */bench.txt or *.bench.txt: %s", e, wantBaseline)
		}
		for _, f := range found {
			if fi, err := os.Stat(f); err != nil {
				bad("baseline", "%v", err)
			} else {
				checkBench(bad, f, fi)
			}
		}
	}
}

// checkBench checks one baseline bench.txt, fi its os.Stat (CheckBench).
func checkBench(bad badFunc, path string, fi fs.FileInfo) {
	if err := CheckBench(path, fi); err != nil {
		bad("baseline", "%v", err)
	}
}

// CheckBench says why the file at path, fi its stat, cannot be a baseline
// bench.txt: not a regular file (a FIFO would block its reader, a device
// may be endless), or more than MaxBaselineBytes; nil when it can.
// Config load and package gate, which reads it, ask the same.
func CheckBench(path string, fi fs.FileInfo) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is %s: %s", path, fileKind(fi.Mode()), wantBaseline)
	case fi.Size() > MaxBaselineBytes:
		return fmt.Errorf("%s holds %d bytes, beyond %d MiB: not a bench.txt (a run's is kilobytes): %s", path, fi.Size(), MaxBaselineBytes>>20, wantBaseline)
	}
	return nil
}

// fileKind names what a file that is neither regular nor a directory is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (reading it waits for a writer)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// checkFile checks that path, named by key, is a regular file (os.Stat,
// so a FIFO is never opened); want says what the file should be.
func checkFile(bad badFunc, key, path, want string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		bad(key, "%v (%s)", err, want)
	case !fi.Mode().IsRegular():
		bad(key, "%s is %s (%s)", path, fileKind(fi.Mode()), want)
	}
}

// checkDir checks that path, named by key, is a directory.
func checkDir(bad badFunc, key, path, want string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		bad(key, "%v (%s)", err, want)
	case !fi.IsDir():
		bad(key, "%s is not a directory (%s)", path, want)
	}
}

// checkName checks a Kubernetes name with one of package validation's
// Is… functions; what names the object ("a namespace").
func checkName(bad badFunc, key, name, what string, valid func(string) []string) {
	if errs := valid(name); len(errs) > 0 {
		bad(key, "%q is not %s name: %s", name, what, strings.Join(errs, "; "))
	}
}
