package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageUser is the user both Courier images run as (hack/image).
const (
	imageUser = "65532:65532"
	imageUID  = 65532
)

// runArgs are ctr run's flags every container of the suite gets: IO
// FIFOs and the cgroup under the work directory's names.
func runArgs(id string) []string {
	return []string{"--fifo-dir", filepath.Join(env.ctrd.dir, "fifo"), "--cgroup", env.ctrd.cgroupParent + "/" + id}
}

// TestPauseImage: the locally built sandbox image runs under containerd
// as 65535 and exits 0 on SIGTERM, as the CRI plugin expects of it.
func TestPauseImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := "pause-check"
	if _, err := env.ctrd.ctr(ctx, append(append([]string{"run", "--detach"}, runArgs(id)...), pauseRef, id)...); err != nil {
		t.Fatal(err)
	}
	pid := taskPID(ctx, t, id)
	if uid, gid := processIDs(t, pid); uid != "65535" || gid != "65535" {
		t.Errorf("pause runs as %s:%s, want 65535:65535", uid, gid)
	}
	if _, err := env.ctrd.ctr(ctx, "tasks", "kill", "--signal", "SIGTERM", id); err != nil {
		t.Fatal(err)
	}
	status := waitStopped(ctx, t, id)
	if _, err := env.ctrd.ctr(ctx, "tasks", "delete", id); err != nil {
		t.Error(err)
	}
	if _, err := env.ctrd.ctr(ctx, "containers", "delete", id); err != nil {
		t.Error(err)
	}
	if status != "STOPPED" {
		t.Errorf("pause after SIGTERM: %s", status)
	}
}

// TestImages runs each Courier image's binary under containerd, checks
// who it ran as, and checks the arm64 image's binary.
func TestImages(t *testing.T) {
	for _, c := range []string{"courier-apiserver", "courier-agent"} {
		t.Run(c, func(t *testing.T) {
			a, err := readArchive(env.images[c])
			if err != nil {
				t.Fatal(err)
			}
			ref, err := a.ref()
			if err != nil {
				t.Fatal(err)
			}
			_, cfg, err := a.image("amd64")
			if err != nil {
				t.Fatal(err)
			}
			entrypoint := "/usr/local/bin/" + c
			if !slices.Equal(cfg.Config.Entrypoint, []string{entrypoint}) {
				t.Fatalf("entrypoint %q, want [%s]", cfg.Config.Entrypoint, entrypoint)
			}
			if cfg.Config.User != imageUser {
				t.Errorf("image user %q, want %q", cfg.Config.User, imageUser)
			}
			version := cfg.Config.Labels["org.opencontainers.image.version"]
			if version == "" {
				t.Fatal("no org.opencontainers.image.version label")
			}
			t.Run("version", func(t *testing.T) { testVersion(t, c, ref, entrypoint, version) })
			t.Run("user", func(t *testing.T) {
				if c == "courier-apiserver" {
					testAPIServerUser(t, ref, entrypoint)
				} else {
					testAgentUser(t, ref, entrypoint)
				}
			})
			t.Run("arm64", func(t *testing.T) { testArm64(t, a, c) })
		})
	}
}

// testVersion: `ctr run --rm <ref> <id> <entrypoint> --version` exits 0
// (ctr exits with the task's status) and prints the image's version.
// ctr 1.6 has no --user: the process runs as the image's own USER.
func testVersion(t *testing.T, c, ref, entrypoint, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := c + "-version"
	args := append(append([]string{"run", "--rm"}, runArgs(id)...), ref, id, entrypoint, "--version")
	out, err := env.ctrd.ctr(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ctr run --rm %s %s %s --version:\n%s", ref, id, entrypoint, out)
	if want := "Kubernetes " + version; !slices.Contains(strings.Split(out, "\n"), want) {
		t.Errorf("--version printed %q, want a line %q", out, want)
	}
}

// testAPIServerUser: courier-apiserver without --tls-cert-file writes a
// self-signed certificate under --cert-dir (a host directory mounted in,
// writable by anyone) before it needs a cluster; the files it made belong
// to the user it really ran as. It then fails (no cluster): expected.
func testAPIServerUser(t *testing.T, ref, entrypoint string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := sharedDir(t, "apiserver-user")
	id := "courier-apiserver-user"
	args := append(append([]string{"run", "--rm"}, runArgs(id)...),
		"--mount", "type=bind,src="+dir+",dst=/out,options=rbind:rw",
		ref, id, entrypoint, "--cert-dir=/out/certs",
		"--kubeconfig=/out/kubeconfig", "--authentication-kubeconfig=/out/kubeconfig", "--authorization-kubeconfig=/out/kubeconfig")
	out, err := env.ctrd.ctr(ctx, args...)
	if err == nil {
		t.Fatalf("courier-apiserver with no cluster to reach exited 0:\n%s", out)
	}
	for _, f := range []string{"certs", "certs/apiserver.crt", "certs/apiserver.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%v; courier-apiserver's output:\n%s", err, out)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != imageUID || sys.Gid != imageUID {
			t.Errorf("%s made by %d:%d, want %s", f, sys.Uid, sys.Gid, imageUser)
		}
	}
}

// testAgentUser: courier-agent keeps retrying an unreachable cluster, so
// it stays up long enough to read its credentials, its cgroup and its
// network namespace from /proc.
func testAgentUser(t *testing.T, ref, entrypoint string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := sharedDir(t, "agent-user")
	id := "courier-agent-user"
	args := append(append([]string{"run", "--detach"}, runArgs(id)...),
		"--mount", "type=bind,src="+dir+",dst=/out,options=rbind:ro",
		ref, id, entrypoint, "--cluster=fleet-default/node-suite",
		"--upstream-kubeconfig=/out/kubeconfig", "--kubeconfig=/out/kubeconfig",
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:8081")
	if _, err := env.ctrd.ctr(ctx, args...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = env.ctrd.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		waitStopped(ctx, t, id)
		if _, err := env.ctrd.ctr(ctx, "tasks", "delete", id); err != nil {
			t.Error(err)
		}
		if _, err := env.ctrd.ctr(ctx, "containers", "delete", id); err != nil {
			t.Error(err)
		}
	}()
	pid := taskPID(ctx, t, id)
	if uid, gid := processIDs(t, pid); uid != strconv.Itoa(imageUID) || gid != strconv.Itoa(imageUID) {
		t.Errorf("courier-agent runs as %s:%s, want %s", uid, gid, imageUser)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := env.ctrd.cgroupParent + "/" + id; !strings.Contains(string(cg), ":"+want+"\n") {
		t.Errorf("courier-agent's cgroups do not include %s:\n%s", want, cg)
	}
	own, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	host, err2 := os.Readlink("/proc/self/ns/net")
	if err1 != nil || err2 != nil || own == host {
		t.Errorf("courier-agent's network namespace %q (%v), the suite's %q (%v): want its own", own, err1, host, err2)
	}
}

// testArm64: the arm64 image's binary (its entrypoint, read from the
// archive's linux/arm64 manifest and layer) is an aarch64 ELF, and the
// amd64 one an x86-64 ELF: the check can tell them apart.
func testArm64(t *testing.T, a *ociArchive, c string) {
	for arch, want := range map[string]elf.Machine{"arm64": elf.EM_AARCH64, "amd64": elf.EM_X86_64} {
		_, cfg, err := a.image(arch)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Config.Entrypoint) != 1 {
			t.Fatalf("linux/%s entrypoint %q", arch, cfg.Config.Entrypoint)
		}
		bin, err := a.file(arch, strings.TrimPrefix(cfg.Config.Entrypoint[0], "/"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("linux/%s %s: %v", arch, c, err)
		}
		if f.Machine != want || f.Class != elf.ELFCLASS64 {
			t.Errorf("linux/%s %s: ELF %v %v, want %v ELFCLASS64", arch, c, f.Machine, f.Class, want)
		}
		t.Logf("linux/%s %s: ELF %v, %d bytes", arch, cfg.Config.Entrypoint[0], f.Machine, len(bin))
	}
}

// TestImageReproducible: `make image` twice from a clean clone of HEAD
// (so that edits in the work tree cannot change the second build) gives
// the same index digests and the same archive bytes. hack/image's own
// tests check the same of its image assembly with a stand-in binary; this
// checks it of Courier's real binaries, through the Makefile.
// COURIER_NODE_SKIP_REPRO=1 skips it (it takes a few minutes).
func TestImageReproducible(t *testing.T) {
	if os.Getenv("COURIER_NODE_SKIP_REPRO") == "1" {
		t.Skip("COURIER_NODE_SKIP_REPRO=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	clone := filepath.Join(env.workDir, "clone")
	if out, err := command(ctx, "", "git", "clone", "--quiet", "--shared", env.repoRoot, clone); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var runs []map[string]string
	for i := range 2 {
		began := time.Now()
		out, err := command(ctx, clone, "make", "image")
		if err != nil {
			t.Fatalf("make image (run %d): %v:\n%s", i+1, err, out)
		}
		t.Logf("make image (run %d, %s):\n%s", i+1, time.Since(began).Round(time.Second), out)
		got := map[string]string{}
		for _, c := range []string{"courier-apiserver", "courier-agent"} {
			path := filepath.Join(clone, "_output", "images", c+".oci.tar")
			a, err := readArchive(path)
			if err != nil {
				t.Fatal(err)
			}
			top, err := a.top()
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			got[c+" index"] = top.Annotations[refNameKey] + "@" + top.Digest
			got[c+" archive"] = "sha256:" + hex.EncodeToString(sum[:])
		}
		runs = append(runs, got)
	}
	for k, v := range runs[0] {
		if runs[1][k] != v {
			t.Errorf("%s differs: %s, then %s", k, v, runs[1][k])
		} else {
			t.Logf("%s: %s both times", k, v)
		}
	}
}

// command runs name in dir (its own process group, killed whole when ctx
// ends) and returns its output.
func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sharedDir is a directory under the work directory that a container's
// non-root user may write to, holding a kubeconfig for a cluster that
// cannot be reached (127.0.0.1:1 in the container's own network
// namespace).
func sharedDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(env.workDir, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// taskPID waits for task id to run and returns its process id.
func taskPID(ctx context.Context, t *testing.T, id string) int {
	t.Helper()
	for {
		pid, status := task(ctx, t, id)
		if status == "RUNNING" && pid > 0 {
			return pid
		}
		if status == "STOPPED" {
			t.Fatalf("task %s stopped", id)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s not running: %s", id, status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitStopped waits (up to 30 s) for task id to stop and returns its last
// status.
func waitStopped(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, status := task(ctx, t, id)
		if status == "STOPPED" || status == "" || time.Now().After(deadline) {
			return status
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// task is task id's pid and status from `ctr tasks ls` ("" when absent).
func task(ctx context.Context, t *testing.T, id string) (int, string) {
	t.Helper()
	out, err := env.ctrd.ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == id {
			pid, _ := strconv.Atoi(f[1])
			return pid, f[2]
		}
	}
	return 0, ""
}

// processIDs is the real user and group id of process pid.
func processIDs(t *testing.T, pid int) (uid, gid string) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// Real, effective, saved and filesystem ids must all agree.
		if f[0] == "Uid:" && f[1] == f[2] && f[2] == f[3] && f[3] == f[4] {
			uid = f[1]
		}
		if f[0] == "Gid:" && f[1] == f[2] && f[2] == f[3] && f[3] == f[4] {
			gid = f[1]
		}
	}
	return uid, gid
}

// TestContainerdListensOnLoopbackOnly: containerd's only TCP listeners
// (the CRI plugin's stream server) are on 127.0.0.1 or ::1.
func TestContainerdListensOnLoopbackOnly(t *testing.T) {
	pid := env.ctrd.cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	sockets := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			sockets[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	loopback := map[string]bool{"0100007F": true, "00000000000000000000000001000000": true}
	listeners := 0
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... inode (the tenth field)
			if len(f) < 10 || f[3] != "0A" || !sockets[f[9]] {
				continue
			}
			listeners++
			addr, _, _ := strings.Cut(f[1], ":")
			if !loopback[addr] {
				t.Errorf("containerd listens on %s %s (not loopback)", table, f[1])
			}
		}
	}
	t.Logf("containerd has %d TCP listener(s), all on loopback", listeners)
}
