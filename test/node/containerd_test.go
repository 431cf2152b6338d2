package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runDir is where containerd 1.6's runc shim puts its sockets
// (<runDir>/s) and runc its state (<runDir>/runc) whatever the config
// says: the one place outside the work directory the suite writes to. It
// removes what it created there (empty directories only) when it stops.
const runDir = "/run/containerd"

// pauseRef is the sandbox image's name: the CRI plugin's sandbox_image,
// built and imported by the suite (never pulled).
const pauseRef = "courier.local/pause:v1"

// containerd is the suite's own containerd: config, root, state, socket
// and log under dir, its containers' cgroups under cgroupParent.
type containerd struct {
	dir          string
	sock         string
	log          string
	cgroupParent string // in every cgroup v1 hierarchy
	cniBinDir    string
	hadRunDir    bool
	cmd          *exec.Cmd
	exited       chan struct{}
}

// configTOML is containerd 1.6's version 2 config: everything under the
// work directory, nothing listening but its unix sockets (the CRI stream
// server on loopback only), cgroupfs, overlayfs, the local pause image.
// restrict_oom_score_adj: the kubelet asks for oom_score_adj -998 for
// sandboxes, which needs CAP_SYS_RESOURCE, and this machine (itself a
// container) does not give it: runc fails with "failed to update
// /proc/self/oom_score_adj: Permission denied". With it containerd never
// sets a score below its own.
func (c *containerd) configTOML() string {
	d := c.dir
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.sock, filepath.Join(d, "opt"),
		pauseRef, c.cniBinDir, filepath.Join(d, "cni", "net.d"))
}

// startContainerd starts containerd in dir, inside the network namespace
// netns (a path, as `ip netns` makes them), and waits until ctr reaches
// it. Its containers' cgroups go under /<name>.
func startContainerd(ctx context.Context, dir, name, netns, cniBinDir string) (*containerd, error) {
	c := &containerd{
		dir:          dir,
		sock:         filepath.Join(dir, "containerd.sock"),
		log:          filepath.Join(dir, "containerd.log"),
		cgroupParent: "/" + name,
		cniBinDir:    cniBinDir,
		exited:       make(chan struct{}),
	}
	if _, err := os.Stat(runDir); err == nil {
		c.hadRunDir = true
	}
	for _, sub := range []string{"root", "state", "opt", "fifo", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(c.configTOML()), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// nsenter changes only the network namespace: containerd shares the
	// mounts of the suite (and of a kubelet), as on a real node.
	c.cmd = exec.Command("nsenter", "--net="+netns, "containerd", "--config", config)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// Its own process group: a test killed by a signal does not take it
	// down half way, and stop() ends exactly this process.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting containerd: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ctr(vctx, "version")
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-c.exited:
			return c, fmt.Errorf("containerd exited at start; its log:\n%s", tail(c.log, 30))
		default:
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("containerd did not answer within 30s: %v; its log:\n%s", err, tail(c.log, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ctr runs ctr against this containerd in the k8s.io namespace (the CRI
// plugin's, where a kubelet finds images), bounded by ctx and by ctr's own
// --timeout. It returns stdout and stderr together.
func (c *containerd) ctr(ctx context.Context, args ...string) (string, error) {
	timeout := 2 * time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	full := append([]string{"--address", c.sock, "--namespace", "k8s.io",
		"--timeout", timeout.Round(time.Second).String(), "--connect-timeout", "10s"}, args...)
	cmd := exec.CommandContext(ctx, "ctr", full...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// stop removes every task and container, stops containerd, kills any shim
// left of it, unmounts everything under the work directory (rootfs,
// network namespaces of the CRI plugin), removes the cgroups the suite's
// containers were given and the empty directories left in runDir. It
// reports everything that went wrong; the work directory itself is the
// caller's to remove.
func (c *containerd) stop() error {
	var errs []error
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
		default:
			errs = append(errs, c.removeContainers())
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(15 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.exited
			}
		}
	}
	errs = append(errs, c.killShims(), unmountUnder(c.dir), c.removeCgroups())
	if !c.hadRunDir {
		removeEmptyDirs(runDir)
	}
	return errors.Join(errs...)
}

// removeContainers kills every task and deletes every container in the
// k8s.io namespace of this containerd (the suite's own: nothing else uses
// it).
func (c *containerd) removeContainers() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.ctr(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		if _, err := c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
		// The task is deleted once it has exited: retry briefly.
		for i := 0; i < 20; i++ {
			if _, err = c.ctr(ctx, "tasks", "delete", id); err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if _, err := c.ctr(ctx, "containers", "delete", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims kills the runc shims started by this containerd: those whose
// command line names its socket (-address <sock>). They exit by themselves
// once their task is deleted; this is for a run that stopped half way.
func (c *containerd) killShims() error {
	pids, err := processesWithArg(c.sock)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// processesWithArg lists the processes one of whose arguments is arg.
func processesWithArg(arg string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, s.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or under dir, deepest first (what
// `umount -R` does), lazily when a plain unmount fails.
func unmountUnder(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, 0); err != nil {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the cgroup the suite's containers (and a
// kubelet's kubepods) were put under, in every cgroup v1 hierarchy (and the
// unified one of a hybrid setup), children first. Only empty cgroups can
// be removed: a process still in one makes this fail, and says so.
func (c *containerd) removeCgroups() error {
	roots, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	roots = append(roots, "/sys/fs/cgroup")
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(root, c.cgroupParent), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeEmptyDirs removes dir's empty directories, children first, and dir
// itself when that leaves it empty. Anything with a file in it stays.
func removeEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i]) // fails, harmlessly, on a directory with something in it
	}
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
