// Package cuda is the part of the CUDA driver API that vllmsim's real-device mode and the
// link probe need: device memory, pinned host memory and synchronous copies between them.
// libcuda.so.1 is opened at run time (dlopen, as go-nvml opens libnvidia-ml.so.1), so building
// needs no CUDA header or library, and a machine without the NVIDIA driver gets an error that
// names it instead of a binary that does not start. Every call of a Device runs on one
// goroutine locked to its OS thread, where the device's primary context is current.
package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stddef.h>

// The driver API's types as cuda.h declares them (CUresult an enum, CUdevice an int,
// CUdeviceptr 64 bits wide), declared here so that no CUDA header is needed to build.
typedef int wb_result;
typedef unsigned long long wb_dptr;

static void *wb_lib;
// Each entry point by the name cuda.h binds it to: the 64-bit ("_v2") entry points
// replaced the originals in CUDA 3.2 (cuda.h: "Functions which changed 3.1 -> 3.2 for 64
// bit stuff ... #define cuMemAlloc cuMemAlloc_v2"), cuDevicePrimaryCtxRelease in 11.0.
static wb_result (*wb_cuInit)(unsigned int);
static wb_result (*wb_cuDriverGetVersion)(int *);
static wb_result (*wb_cuDeviceGetCount)(int *);
static wb_result (*wb_cuDeviceGet)(int *, int);
static wb_result (*wb_cuDeviceGetName)(char *, int, int);
static wb_result (*wb_cuDeviceGetPCIBusId)(char *, int, int);
static wb_result (*wb_cuDevicePrimaryCtxRetain)(void **, int);
static wb_result (*wb_cuDevicePrimaryCtxRelease)(int);
static wb_result (*wb_cuCtxSetCurrent)(void *);
static wb_result (*wb_cuCtxSynchronize)(void);
static wb_result (*wb_cuMemGetInfo)(size_t *, size_t *);
static wb_result (*wb_cuMemAlloc)(wb_dptr *, size_t);
static wb_result (*wb_cuMemFree)(wb_dptr);
static wb_result (*wb_cuMemAllocHost)(void **, size_t);
static wb_result (*wb_cuMemFreeHost)(void *);
static wb_result (*wb_cuMemcpyHtoD)(wb_dptr, const void *, size_t);
static wb_result (*wb_cuMemcpyDtoH)(void *, wb_dptr, size_t);
static wb_result (*wb_cuMemcpyDtoD)(wb_dptr, wb_dptr, size_t);
static wb_result (*wb_cuMemsetD32)(wb_dptr, unsigned int, size_t);
static wb_result (*wb_cuGetErrorName)(wb_result, const char **);

// wb_open loads the library and every entry point; it returns NULL, or the first thing
// missing (dlerror's text, or the symbol's name).
// wb_missing is set when the library loaded but lacked an entry point (an old driver).
static int wb_missing;
static int wb_was_missing(void) { return wb_missing; }
static const char *wb_open(const char *name) {
	if (wb_lib != NULL) return NULL;
	wb_missing = 0;
	void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) return dlerror();
#define WB_SYM(var, sym) if ((*(void **)(&var) = dlsym(h, sym)) == NULL) { dlclose(h); wb_missing = 1; return sym; }
	WB_SYM(wb_cuInit, "cuInit")
	WB_SYM(wb_cuDriverGetVersion, "cuDriverGetVersion")
	WB_SYM(wb_cuDeviceGetCount, "cuDeviceGetCount")
	WB_SYM(wb_cuDeviceGet, "cuDeviceGet")
	WB_SYM(wb_cuDeviceGetName, "cuDeviceGetName")
	WB_SYM(wb_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")
	WB_SYM(wb_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	WB_SYM(wb_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	WB_SYM(wb_cuCtxSetCurrent, "cuCtxSetCurrent")
	WB_SYM(wb_cuCtxSynchronize, "cuCtxSynchronize")
	WB_SYM(wb_cuMemGetInfo, "cuMemGetInfo_v2")
	WB_SYM(wb_cuMemAlloc, "cuMemAlloc_v2")
	WB_SYM(wb_cuMemFree, "cuMemFree_v2")
	WB_SYM(wb_cuMemAllocHost, "cuMemAllocHost_v2")
	WB_SYM(wb_cuMemFreeHost, "cuMemFreeHost")
	WB_SYM(wb_cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	WB_SYM(wb_cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	WB_SYM(wb_cuMemcpyDtoD, "cuMemcpyDtoD_v2")
	WB_SYM(wb_cuMemsetD32, "cuMemsetD32_v2")
	WB_SYM(wb_cuGetErrorName, "cuGetErrorName")
#undef WB_SYM
	wb_lib = h;
	return NULL;
}

static wb_result wb_init(void) { return wb_cuInit(0); }
static wb_result wb_driver_version(int *v) { return wb_cuDriverGetVersion(v); }
static wb_result wb_device_count(int *n) { return wb_cuDeviceGetCount(n); }
static wb_result wb_device_get(int *d, int ordinal) { return wb_cuDeviceGet(d, ordinal); }
static wb_result wb_device_name(char *s, int n, int d) { return wb_cuDeviceGetName(s, n, d); }
static wb_result wb_device_bus_id(char *s, int n, int d) { return wb_cuDeviceGetPCIBusId(s, n, d); }
static wb_result wb_ctx_retain(void **c, int d) { return wb_cuDevicePrimaryCtxRetain(c, d); }
static wb_result wb_ctx_release(int d) { return wb_cuDevicePrimaryCtxRelease(d); }
static wb_result wb_ctx_set(void *c) { return wb_cuCtxSetCurrent(c); }
static wb_result wb_sync(void) { return wb_cuCtxSynchronize(); }
static wb_result wb_mem_info(size_t *f, size_t *t) { return wb_cuMemGetInfo(f, t); }
static wb_result wb_alloc(wb_dptr *p, size_t n) { return wb_cuMemAlloc(p, n); }
static wb_result wb_free(wb_dptr p) { return wb_cuMemFree(p); }
static wb_result wb_alloc_host(void **p, size_t n) { return wb_cuMemAllocHost(p, n); }
static wb_result wb_free_host(void *p) { return wb_cuMemFreeHost(p); }
static wb_result wb_htod(wb_dptr d, const void *h, size_t n) { return wb_cuMemcpyHtoD(d, h, n); }
static wb_result wb_dtoh(void *h, wb_dptr d, size_t n) { return wb_cuMemcpyDtoH(h, d, n); }
static wb_result wb_dtod(wb_dptr d, wb_dptr s, size_t n) { return wb_cuMemcpyDtoD(d, s, n); }
static wb_result wb_memset32(wb_dptr d, unsigned int v, size_t n) { return wb_cuMemsetD32(d, v, n); }
static const char *wb_error_name(wb_result r) {
	const char *s = NULL;
	if (wb_cuGetErrorName == NULL || wb_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Library is the CUDA driver library's name, as the NVIDIA driver installs it (and the NVIDIA
// Container Toolkit mounts it into a container).
const Library = "libcuda.so.1"

// ErrNoDriver is returned by Open where the CUDA driver library cannot be loaded.
var ErrNoDriver = errors.New("the CUDA driver library " + Library + " cannot be loaded: install the NVIDIA driver (in a container: run it with the NVIDIA Container Toolkit, which mounts the driver's libraries)")

// openMu guards the C side's library handle and entry points, set once by the first Open that
// succeeds.
var openMu sync.Mutex

// load opens name and every entry point.
func load(name string) error {
	openMu.Lock()
	defer openMu.Unlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if why := C.wb_open(cname); why != nil {
		if C.wb_was_missing() != 0 {
			return fmt.Errorf("%s has no entry point %s: the NVIDIA driver is older than CUDA 11.0's (R450); update it", name, C.GoString(why))
		}
		return fmt.Errorf("%w (%s)", ErrNoDriver, C.GoString(why))
	}
	return nil
}

// Error is a CUDA driver call that did not return CUDA_SUCCESS.
type Error struct {
	Call string // the entry point, e.g. cuMemAlloc_v2
	Code int    // its CUresult
	Name string // the driver's name for Code (cuGetErrorName), "" when it has none
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult"
	}
	return fmt.Sprintf("%s: %s (%d)", e.Call, name, e.Code)
}

// ErrOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY's code (cuda.h: CUDA_ERROR_OUT_OF_MEMORY = 2).
const ErrOutOfMemory = 2

func check(call string, r C.wb_result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r)}
	if s := C.wb_error_name(r); s != nil {
		e.Name = C.GoString(s)
	}
	return e
}

// initErr says what a failed cuInit usually means: no device left by CUDA_VISIBLE_DEVICES
// (CUDA_ERROR_NO_DEVICE, 100), or a kernel module that is missing or does not match the
// library (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803, CUDA_ERROR_UNKNOWN 999 and the like).
func initErr(err error) error {
	if err == nil {
		return nil
	}
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if !set {
		visible = "(unset)"
	}
	var ce *Error
	if errors.As(err, &ce) && ce.Code == 100 {
		return fmt.Errorf("%w: no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)", err, visible)
	}
	return fmt.Errorf("%w: the CUDA driver could not start (CUDA_VISIBLE_DEVICES=%s; is the nvidia kernel module loaded and of the library's version? nvidia-smi says)", err, visible)
}

// Ptr is a device address.
type Ptr uint64

// Host is page-locked host memory the device copies to and from at the link's full rate.
type Host struct {
	p unsafe.Pointer
	n uint64
}

// Size is the buffer's length in bytes.
func (h *Host) Size() uint64 {
	if h == nil {
		return 0
	}
	return h.n
}

// Device is one GPU with its primary context current on a thread of its own.
type Device struct {
	Ordinal int
	Name    string
	BusID   string // cuDeviceGetPCIBusId's, e.g. 0000:3B:00.0
	Driver  int    // cuDriverGetVersion's, e.g. 12080 for 12.8

	dev   C.int
	calls chan func()
	done  chan struct{}
	// mu guards closed: a call after Close is an error, not a send on a closed channel.
	mu     sync.Mutex
	closed bool
}

// Open loads the driver, initialises it and makes ordinal's primary context current on a
// thread of the Device's own. The ordinal counts the devices CUDA_VISIBLE_DEVICES leaves, in
// CUDA_DEVICE_ORDER's order, as the driver itself applies them (a vLLM worker's cuda:0 is
// ordinal 0 of what its CUDA_VISIBLE_DEVICES names).
func Open(ordinal int) (*Device, error) {
	if err := load(Library); err != nil {
		return nil, err
	}
	d := &Device{Ordinal: ordinal, calls: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go d.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device's thread: it takes the context, then runs every call until Close.
func (d *Device) loop(started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, context and all
	defer close(d.done)
	var ctx unsafe.Pointer
	err := func() error {
		if err := initErr(check("cuInit", C.wb_init())); err != nil {
			return err
		}
		var v, n C.int
		if err := check("cuDriverGetVersion", C.wb_driver_version(&v)); err != nil {
			return err
		}
		d.Driver = int(v)
		if err := check("cuDeviceGetCount", C.wb_device_count(&n)); err != nil {
			return err
		}
		if d.Ordinal < 0 || d.Ordinal >= int(n) {
			return fmt.Errorf("CUDA device %d: the driver sees %d device(s) (CUDA_VISIBLE_DEVICES limits them)", d.Ordinal, n)
		}
		if err := check("cuDeviceGet", C.wb_device_get(&d.dev, C.int(d.Ordinal))); err != nil {
			return err
		}
		buf := make([]byte, 256)
		if err := check("cuDeviceGetName", C.wb_device_name((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), d.dev)); err != nil {
			return err
		}
		d.Name = C.GoString((*C.char)(unsafe.Pointer(&buf[0])))
		if err := check("cuDeviceGetPCIBusId", C.wb_device_bus_id((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), d.dev)); err != nil {
			return err
		}
		d.BusID = C.GoString((*C.char)(unsafe.Pointer(&buf[0])))
		if err := check("cuDevicePrimaryCtxRetain", C.wb_ctx_retain(&ctx, d.dev)); err != nil {
			return err
		}
		if err := check("cuCtxSetCurrent", C.wb_ctx_set(ctx)); err != nil {
			C.wb_ctx_release(d.dev)
			return err
		}
		return nil
	}()
	started <- err
	if err != nil {
		return
	}
	for f := range d.calls {
		f()
	}
	C.wb_ctx_release(d.dev)
}

// do runs f on the device's thread and returns its error.
func (d *Device) do(f func() error) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("CUDA device closed")
	}
	var err error
	ran := make(chan struct{})
	d.calls <- func() { err = f(); close(ran) }
	d.mu.Unlock()
	<-ran
	return err
}

// Close releases the primary context (freeing what is still allocated in it) and ends the
// device's thread.
func (d *Device) Close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.calls)
	}
	d.mu.Unlock()
	<-d.done
}

// MemInfo is the device's free and total memory as the driver reports them.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.do(func() error {
		var f, t C.size_t
		err := check("cuMemGetInfo_v2", C.wb_mem_info(&f, &t))
		free, total = uint64(f), uint64(t)
		return err
	})
	return
}

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n uint64) (Ptr, error) {
	var p C.wb_dptr
	err := d.do(func() error { return check("cuMemAlloc_v2", C.wb_alloc(&p, C.size_t(n))) })
	return Ptr(p), err
}

// Free frees device memory from Alloc.
func (d *Device) Free(p Ptr) error {
	return d.do(func() error { return check("cuMemFree_v2", C.wb_free(C.wb_dptr(p))) })
}

// AllocHost allocates n bytes of page-locked host memory.
func (d *Device) AllocHost(n uint64) (*Host, error) {
	h := &Host{n: n}
	err := d.do(func() error { return check("cuMemAllocHost_v2", C.wb_alloc_host(&h.p, C.size_t(n))) })
	if err != nil {
		return nil, err
	}
	return h, nil
}

// FreeHost frees h (nil: nothing).
func (d *Device) FreeHost(h *Host) error {
	if h == nil {
		return nil
	}
	if h.p == nil {
		return nil // freed already
	}
	err := d.do(func() error { return check("cuMemFreeHost", C.wb_free_host(h.p)) })
	h.p, h.n = nil, 0
	return err
}

// rangeOK refuses a copy past the end of a host buffer.
func (h *Host) rangeOK(off, n uint64) error {
	if off+n > h.Size() {
		return fmt.Errorf("host range %d+%d past the buffer's %d bytes", off, n, h.Size())
	}
	return nil
}

// CopyHtoD copies n bytes from h at off to dst and returns once they are there.
func (d *Device) CopyHtoD(dst Ptr, h *Host, off, n uint64) error {
	if err := h.rangeOK(off, n); err != nil {
		return err
	}
	return d.do(func() error {
		if err := check("cuMemcpyHtoD_v2", C.wb_htod(C.wb_dptr(dst), unsafe.Add(h.p, off), C.size_t(n))); err != nil {
			return err
		}
		return check("cuCtxSynchronize", C.wb_sync())
	})
}

// CopyDtoH copies n bytes from src to h at off and returns once they are there.
func (d *Device) CopyDtoH(h *Host, off uint64, src Ptr, n uint64) error {
	if err := h.rangeOK(off, n); err != nil {
		return err
	}
	return d.do(func() error {
		if err := check("cuMemcpyDtoH_v2", C.wb_dtoh(unsafe.Add(h.p, off), C.wb_dptr(src), C.size_t(n))); err != nil {
			return err
		}
		return check("cuCtxSynchronize", C.wb_sync())
	})
}

// CopyDtoD copies n bytes on the device and returns once the copy is done (a device-to-device
// copy does not synchronise with the host by itself).
func (d *Device) CopyDtoD(dst, src Ptr, n uint64) error {
	return d.do(func() error {
		if err := check("cuMemcpyDtoD_v2", C.wb_dtod(C.wb_dptr(dst), C.wb_dptr(src), C.size_t(n))); err != nil {
			return err
		}
		return check("cuCtxSynchronize", C.wb_sync())
	})
}

// Direction is a copy's direction between pinned host memory and the device.
type Direction int

const (
	HostToDevice Direction = iota
	DeviceToHost
)

// TimeCopies makes count copies of n bytes between h and p in direction dir, back to back on
// the device's thread (no hand-off between copies: a copy from or to pinned memory returns once
// its bytes are there), and returns the time from the first one's issue to the last one's
// return, the context synchronised.
func (d *Device) TimeCopies(dir Direction, p Ptr, h *Host, n uint64, count int) (time.Duration, error) {
	if err := h.rangeOK(0, n); err != nil {
		return 0, err
	}
	var took time.Duration
	err := d.do(func() error {
		start := time.Now()
		for range count {
			var r C.wb_result
			call := "cuMemcpyHtoD_v2"
			if dir == HostToDevice {
				r = C.wb_htod(C.wb_dptr(p), h.p, C.size_t(n))
			} else {
				call, r = "cuMemcpyDtoH_v2", C.wb_dtoh(h.p, C.wb_dptr(p), C.size_t(n))
			}
			if err := check(call, r); err != nil {
				return err
			}
		}
		if err := check("cuCtxSynchronize", C.wb_sync()); err != nil {
			return err
		}
		took = time.Since(start)
		return nil
	})
	return took, err
}

// Fill sets n bytes at p (a multiple of 4) to the 32-bit word v and returns once done.
func (d *Device) Fill(p Ptr, v uint32, n uint64) error {
	return d.do(func() error {
		if err := check("cuMemsetD32_v2", C.wb_memset32(C.wb_dptr(p), C.uint(v), C.size_t(n/4))); err != nil {
			return err
		}
		return check("cuCtxSynchronize", C.wb_sync())
	})
}

// Bytes is h's memory as a Go slice, for reading back what a copy brought.
func (h *Host) Bytes() []byte {
	if h == nil || h.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.n)
}

// Ordinal is the CUDA device ordinal of the GPU at PCI address bus (as NVML or the driver
// writes it) among the devices CUDA_VISIBLE_DEVICES leaves this process; an error names the
// devices the driver does see.
func Ordinal(bus string) (int, error) {
	want, err := NormalizeBusID(bus)
	if err != nil {
		return 0, err
	}
	if err := load(Library); err != nil {
		return 0, err
	}
	openMu.Lock() // cuInit and the device queries need no context: any thread will do
	defer openMu.Unlock()
	if err := initErr(check("cuInit", C.wb_init())); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.wb_device_count(&n)); err != nil {
		return 0, err
	}
	var seen []string
	buf := make([]byte, 64)
	for i := range int(n) {
		var dev C.int
		if err := check("cuDeviceGet", C.wb_device_get(&dev, C.int(i))); err != nil {
			return 0, err
		}
		if err := check("cuDeviceGetPCIBusId", C.wb_device_bus_id((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), dev)); err != nil {
			return 0, err
		}
		got, err := NormalizeBusID(C.GoString((*C.char)(unsafe.Pointer(&buf[0]))))
		if err != nil {
			return 0, err
		}
		if got == want {
			return i, nil
		}
		seen = append(seen, got)
	}
	return 0, fmt.Errorf("GPU at PCI %s is not among the %d CUDA device(s) this process sees %v (CUDA_VISIBLE_DEVICES hides it?)", want, n, seen)
}
