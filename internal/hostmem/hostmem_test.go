package hostmem

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gib = 1 << 30

// tree writes files (path → content) under a fresh root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return root
}

func n(b uint64) string { return strconv.FormatUint(b, 10) }

const meminfo100 = "MemTotal:       263000000 kB\nMemFree:         1000000 kB\nMemAvailable:   104857600 kB\n" // 100 GiB available

func TestRead(t *testing.T) {
	// A Pod on cgroup v2: the container's limit 8 GiB with 2 GiB of working
	// set (3 GiB charged, 1 GiB of it inactive page cache), inside a Pod
	// limited to 10 GiB with 6 GiB in use: the Pod leaves less.
	pod := map[string]string{
		"proc/meminfo":                                         meminfo100,
		"proc/self/cgroup":                                     "0::/kubepods.slice/pod1/ctr\n",
		"sys/fs/cgroup/cgroup.controllers":                     "cpuset cpu io memory pids\n",
		"sys/fs/cgroup/kubepods.slice/memory.max":              "max\n",
		"sys/fs/cgroup/kubepods.slice/memory.current":          n(50 * gib),
		"sys/fs/cgroup/kubepods.slice/memory.stat":             "anon 1\n",
		"sys/fs/cgroup/kubepods.slice/pod1/memory.max":         n(10 * gib),
		"sys/fs/cgroup/kubepods.slice/pod1/memory.current":     n(6 * gib),
		"sys/fs/cgroup/kubepods.slice/pod1/memory.stat":        "anon 5\ninactive_file 0\n",
		"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.max":     n(8 * gib),
		"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.current": n(3 * gib),
		"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.stat":    "anon 2147483648\nactive_file 5\ninactive_file " + n(gib) + "\n",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	// Docker on cgroup v1 without a cgroup namespace: the host's path, the
	// container's own cgroup mounted at the root.
	docker := map[string]string{
		"proc/meminfo":     meminfo100,
		"proc/self/cgroup": "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": n(2 * gib),
		"sys/fs/cgroup/memory/memory.usage_in_bytes": n(3 * gib / 2),
		"sys/fs/cgroup/memory/memory.stat":           "cache 1\ninactive_file 7\ntotal_inactive_file " + n(gib/2) + "\n",
	}
	cases := []struct {
		name    string
		files   map[string]string
		avail   uint64
		limited bool
		source  string // a part of Available.Source
	}{
		{"pod v2: the Pod's headroom binds", pod, 4 * gib, true, "/kubepods.slice/pod1 memory.max"},
		{"pod v2: the container binds once it holds more", with(pod, "sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.current", n(7*gib)),
			2 * gib, true, "/kubepods.slice/pod1/ctr memory.max"},
		{"v2 without limits: MemAvailable", with(pod, "sys/fs/cgroup/kubepods.slice/pod1/memory.max", "max\n", "sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.max", "max\n"),
			100 * gib, false, "no memory limit"},
		{"a limit above MemAvailable: MemAvailable binds", with(pod, "proc/meminfo", "MemAvailable: 1048576 kB\n"),
			gib, true, "MemAvailable (below the cgroup headroom"},
		{"docker v1, host path: the mount root's limit", docker, gib, true, "/ memory.limit_in_bytes"},
		{"v1 unlimited (PAGE_COUNTER_MAX)", with(docker, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
			100 * gib, false, "no memory limit"},
		{"hybrid: v2 without the memory controller, v1 without memory: none", map[string]string{
			"proc/meminfo": meminfo100, "proc/self/cgroup": "4:cpu:/\n0::/user.slice\n",
			"sys/fs/cgroup/unified/cgroup.controllers": "\n"}, 100 * gib, false, "no memory cgroup limit"},
		{"no /proc/self/cgroup", map[string]string{"proc/meminfo": meminfo100}, 100 * gib, false, "no memory cgroup limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Read(tree(t, c.files), "self")
			require.NoError(t, err)
			assert.Equal(t, c.avail, got.Available.Bytes, "%+v", got)
			assert.Equal(t, c.limited, got.Limited)
			assert.Contains(t, got.Available.Source, c.source)
			if c.files["proc/meminfo"] == meminfo100 {
				assert.Equal(t, uint64(100*gib), got.MemAvailable.Bytes)
			}
		})
	}
}

func TestReadWorkingSetAndSources(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/meminfo":                     meminfo100,
		"proc/self/cgroup":                 "0::/\n",
		"sys/fs/cgroup/cgroup.controllers": "memory\n",
		"sys/fs/cgroup/memory.max":         n(8 * gib),
		"sys/fs/cgroup/memory.current":     n(3 * gib),
		"sys/fs/cgroup/memory.stat":        "inactive_file " + n(4*gib) + "\n",
	})
	c, err := Read(root, "self")
	require.NoError(t, err)
	assert.Equal(t, Figure{Bytes: 0, Source: "(/ memory.current − memory.stat inactive_file)"}, c.Usage, "inactive above usage: working set 0, not a wrap-around")
	assert.Equal(t, Figure{Bytes: 8 * gib, Source: "/ memory.max"}, c.Limit)
	assert.Equal(t, "v2 /", c.Cgroup)
	assert.Equal(t, 8.0, c.Available.GiB())
}

func TestReadErrors(t *testing.T) {
	_, err := Read(t.TempDir(), "self")
	assert.ErrorContains(t, err, "meminfo")
	_, err = Read(tree(t, map[string]string{"proc/meminfo": "MemTotal: 1 kB\n"}), "self")
	assert.ErrorContains(t, err, "no MemAvailable")
	_, err = Read(tree(t, map[string]string{"proc/meminfo": meminfo100, "proc/self/cgroup": "0::/\n",
		"sys/fs/cgroup/cgroup.controllers": "memory", "sys/fs/cgroup/memory.max": "lots"}), "self")
	assert.ErrorContains(t, err, `memory.max: "lots"`)
}

// TestReadThisMachine reads the live system: whatever it runs in, a
// positive figure with a source.
func TestReadThisMachine(t *testing.T) {
	c, err := Read("/", "self")
	require.NoError(t, err)
	assert.Positive(t, c.Available.Bytes)
	assert.NotEmpty(t, c.Available.Source)
	assert.LessOrEqual(t, c.Available.Bytes, c.MemAvailable.Bytes)
	t.Logf("available %.2f GiB from %s (cgroup %q)", c.Available.GiB(), c.Available.Source, c.Cgroup)
}
