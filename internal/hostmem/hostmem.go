// Package hostmem says how much host memory the runner may use: the
// headroom under its memory cgroup's limit when it runs in a container or a
// Pod (cgroup v2 memory.max, v1 memory.limit_in_bytes, each ancestor's
// limit included), else the kernel's MemAvailable; every figure with the
// file it came from.
package hostmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Figure is a number of bytes and where it came from (a file and the
// arithmetic on it), so a report can say how it was measured.
type Figure struct {
	Bytes  uint64
	Source string
}

// GiB is the figure in GiB (2^30 bytes).
func (f Figure) GiB() float64 { return float64(f.Bytes) / (1 << 30) }

// Capacity is what the runner's host memory allows.
type Capacity struct {
	// Available is what the runner may still allocate: the smaller of the
	// cgroup's headroom (when limited) and MemAvailable. Its Source names
	// which one bound.
	Available Figure
	// MemAvailable is /proc/meminfo's MemAvailable: the kernel's estimate
	// of memory available to start new work without swapping, machine-wide.
	MemAvailable Figure
	// Limited is whether a memory cgroup limit applies (a container or
	// Pod with a memory limit, or a systemd slice with MemoryMax).
	Limited bool
	// Limit is the tightest memory limit of the runner's cgroup and its
	// ancestors (zero when not Limited); Usage is that cgroup's working
	// set (usage less inactive file pages, as the kubelet counts it).
	Limit, Usage Figure
	// Cgroup names the cgroup read ("v2 /kubepods/…", "v1 /docker/…"),
	// empty when none with a memory controller was found.
	Cgroup string
}

// unlimitedV1 is the smallest memory.limit_in_bytes taken as "no limit":
// v1 writes PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages).
const unlimitedV1 = 1 << 62

// Read reads the capacity of the process pid ("self" for the runner) with
// root as the file-system root ("/" on a live system; tests give a
// directory holding proc/ and sys/fs/cgroup/).
//
// The cgroup is found from root/proc/PID/cgroup: a v1 hierarchy with the
// memory controller under sys/fs/cgroup/memory, else the v2 unified
// hierarchy at sys/fs/cgroup when its cgroup.controllers lists memory.
// Within a container without a cgroup namespace the path there is the
// host's; the longest suffix of it that exists under the mount is used
// (the container's own cgroup is mounted at the root). From that cgroup up
// to the mount, each level's limit (v2 memory.max, v1
// memory.limit_in_bytes) and working set (v2 memory.current −
// inactive_file, v1 memory.usage_in_bytes − total_inactive_file, from
// memory.stat: kubelet's memory.available, see
// https://kubernetes.io/examples/admin/resource/memory-available.sh) give a
// headroom; the smallest is the cgroup's.
func Read(root, pid string) (Capacity, error) {
	var c Capacity
	ma, err := memAvailable(root)
	if err != nil {
		return c, err
	}
	c.MemAvailable = ma
	c.Available = ma
	cg, err := findCgroup(root, pid)
	if err != nil {
		return c, err
	}
	if cg.dir == "" {
		c.Available.Source = "MemAvailable (no memory cgroup limit): " + ma.Source
		return c, nil
	}
	c.Cgroup = cg.name
	lim, use, err := cg.tightest()
	if err != nil {
		return c, err
	}
	if lim.Source == "" {
		c.Available.Source = "MemAvailable (cgroup " + cg.name + " has no memory limit): " + ma.Source
		return c, nil
	}
	c.Limited, c.Limit, c.Usage = true, lim, use
	head := Figure{Source: fmt.Sprintf("cgroup headroom: %s − %s", lim.Source, use.Source)}
	if lim.Bytes > use.Bytes {
		head.Bytes = lim.Bytes - use.Bytes
	}
	if head.Bytes <= ma.Bytes {
		c.Available = head
	} else {
		c.Available.Source = "MemAvailable (below the cgroup headroom of " + strconv.FormatUint(head.Bytes, 10) + " bytes): " + ma.Source
	}
	return c, nil
}

func memAvailable(root string) (Figure, error) {
	p := filepath.Join(root, "proc/meminfo")
	b, err := os.ReadFile(p)
	if err != nil {
		return Figure{}, fmt.Errorf("hostmem: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return Figure{}, fmt.Errorf("hostmem: %s: MemAvailable %q: %w", p, f[1], err)
			}
			return Figure{Bytes: kb << 10, Source: "/proc/meminfo MemAvailable"}, nil
		}
	}
	return Figure{}, fmt.Errorf("hostmem: %s has no MemAvailable (Linux before 3.14?)", p)
}

// cgroup is the runner's memory cgroup directory and its hierarchy's mount.
type cgroup struct {
	v1         bool
	mount, dir string // dir is under mount; "" when none found
	name       string
}

func findCgroup(root, pid string) (cgroup, error) {
	p := filepath.Join(root, "proc", pid, "cgroup")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return cgroup{}, nil // not Linux cgroups: MemAvailable alone
	}
	if err != nil {
		return cgroup{}, fmt.Errorf("hostmem: %w", err)
	}
	var v2path string
	hasV2 := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path (cgroups(7))
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2path, hasV2 = f[2], true
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			if ctl == "memory" {
				return locate(true, filepath.Join(root, "sys/fs/cgroup/memory"), f[2]), nil
			}
		}
	}
	if hasV2 {
		mount := filepath.Join(root, "sys/fs/cgroup")
		ctl, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(ctl)), "memory") {
			return locate(false, mount, v2path), nil
		}
	}
	return cgroup{}, nil
}

// locate finds cgroup path p under mount: p itself, else its longest
// existing suffix (a container without a cgroup namespace sees the host's
// path, with its own cgroup mounted at the root).
func locate(v1 bool, mount, p string) cgroup {
	ver := "v2"
	if v1 {
		ver = "v1"
	}
	p = path.Clean("/" + p)
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		rel := strings.Join(parts[i:], "/")
		if st, err := os.Stat(filepath.Join(mount, rel)); err == nil && st.IsDir() {
			return cgroup{v1: v1, mount: mount, dir: filepath.Join(mount, rel), name: ver + " " + p}
		}
	}
	if st, err := os.Stat(mount); err == nil && st.IsDir() {
		return cgroup{v1: v1, mount: mount, dir: mount, name: ver + " " + p + " (mounted at the root)"}
	}
	return cgroup{}
}

// tightest walks from the cgroup up to its mount and returns the level
// with the smallest headroom (limit − working set): its limit and working
// set. A level without a limit is skipped; none limited gives zero Figures.
func (c cgroup) tightest() (limit, usage Figure, err error) {
	best := uint64(math.MaxUint64)
	for dir := c.dir; ; dir = filepath.Dir(dir) {
		lim, ok, err := c.limit(dir)
		if err != nil {
			return limit, usage, err
		}
		if ok {
			use, err := c.workingSet(dir)
			if err != nil {
				return limit, usage, err
			}
			head := uint64(0)
			if lim.Bytes > use.Bytes {
				head = lim.Bytes - use.Bytes
			}
			if head < best {
				best, limit, usage = head, lim, use
			}
		}
		if dir == c.mount || len(dir) <= len(c.mount) {
			return limit, usage, nil
		}
	}
}

func (c cgroup) rel(p string) string {
	r, err := filepath.Rel(c.mount, p)
	if err != nil || r == "." {
		return "/"
	}
	return "/" + r
}

// limit is dir's memory limit, false when there is none (or no file: the
// v2 root has no memory.max).
func (c cgroup) limit(dir string) (Figure, bool, error) {
	name := "memory.max"
	if c.v1 {
		name = "memory.limit_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return Figure{}, false, nil
	}
	if err != nil {
		return Figure{}, false, fmt.Errorf("hostmem: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return Figure{}, false, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return Figure{}, false, fmt.Errorf("hostmem: %s: %q: %w", filepath.Join(dir, name), s, err)
	}
	if c.v1 && v >= unlimitedV1 {
		return Figure{}, false, nil
	}
	return Figure{Bytes: v, Source: c.rel(dir) + " " + name}, true, nil
}

// workingSet is dir's usage less its inactive file pages (reclaimable
// without writing anything out), never below 0.
func (c cgroup) workingSet(dir string) (Figure, error) {
	usageFile, statKey := "memory.current", "inactive_file"
	if c.v1 {
		usageFile, statKey = "memory.usage_in_bytes", "total_inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return Figure{}, fmt.Errorf("hostmem: %w", err)
	}
	use, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Figure{}, fmt.Errorf("hostmem: %s: %w", filepath.Join(dir, usageFile), err)
	}
	st, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return Figure{}, fmt.Errorf("hostmem: %w", err)
	}
	var inactive uint64
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == statKey {
			if inactive, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				return Figure{}, fmt.Errorf("hostmem: %s: %s: %w", filepath.Join(dir, "memory.stat"), statKey, err)
			}
		}
	}
	ws := Figure{Source: fmt.Sprintf("(%s %s − memory.stat %s)", c.rel(dir), usageFile, statKey)}
	if use > inactive {
		ws.Bytes = use - inactive
	}
	return ws, nil
}
