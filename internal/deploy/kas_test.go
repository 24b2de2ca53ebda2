package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A real kube-apiserver (Kubernetes v1.32, built from its Go module by
// .ci/kube-apiserver.sh) over Debian's etcd, on loopback, shared by the
// tests of this package and stopped by TestMain. There is no kubelet,
// scheduler or controller manager: objects are validated, defaulted,
// admitted (PodSecurity, RBAC) and stored, server-side apply and field
// ownership are real, and nothing runs; a test that waits on a status
// writes it through the status subresource, as a controller would.

// The shared scripts: build.sh builds the server, start.sh runs it with
// etcd and writes a kubeconfig.
const kasShared = "../../../shared/servers/kube-apiserver"

// kasBinary is where .ci/kube-apiserver.sh builds the server:
// $HEADROOM_KUBE_APISERVER, else the user cache (~/.cache/headroom).
func kasBinary() string {
	if p := os.Getenv("HEADROOM_KUBE_APISERVER"); p != "" {
		return p
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "headroom", "kube-apiserver")
}

// kasServer is the running server.
type kasServer struct {
	dir        string
	kubeconfig string
	config     *rest.Config
	client     kubernetes.Interface
	dynamic    dynamic.Interface
	pids       []int
}

var kas struct {
	once   sync.Once
	server *kasServer
	err    error
	skip   string
	// namespaces counts the namespaces made, for their names.
	namespaces int
}

// realAPIServer gives the shared server, starting it on first use; it skips
// when the binary or etcd is missing, except that a missing binary fails
// under HEADROOM_REQUIRE_SHARED=1 with the build script present, unless
// .ci/run's build failed on this machine and said so in
// $HEADROOM_KAS_UNAVAILABLE.
func realAPIServer(t *testing.T) *kasServer {
	t.Helper()
	if testing.Short() {
		t.Skip("real kube-apiserver tests skipped in -short mode")
	}
	kas.once.Do(func() { kas.server, kas.skip, kas.err = startKAS() })
	if kas.skip != "" {
		if why := os.Getenv("HEADROOM_KAS_UNAVAILABLE"); why != "" {
			t.Skip(kas.skip + " (" + why + ")")
		}
		if !fileExists(kasBinary()) && os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" && fileExists(filepath.Join(kasShared, "build.sh")) {
			t.Fatal(kas.skip + " (HEADROOM_REQUIRE_SHARED=1)")
		}
		t.Skip(kas.skip)
	}
	if kas.err != nil {
		t.Fatal(kas.err)
	}
	return kas.server
}

func startKAS() (*kasServer, string, error) {
	bin := kasBinary()
	if !fileExists(bin) {
		return nil, fmt.Sprintf("kube-apiserver not built at %s, so the chart and deployer were not tried on a real API server: .ci/kube-apiserver.sh build (run by .ci/run; 5-20 minutes once per machine), or set HEADROOM_KUBE_APISERVER", bin), nil
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		return nil, "etcd not found, so the chart and deployer were not tried on a real API server: apt-get install etcd-server (.ci/run does)", nil
	}
	start := filepath.Join(kasShared, "start.sh")
	if !fileExists(start) {
		return nil, "no " + start + ": the shared kube-apiserver scripts are missing", nil
	}
	dir, err := os.MkdirTemp("", "headroom-kas-")
	if err != nil {
		return nil, "", err
	}
	s := &kasServer{dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", start, bin, dir).CombinedOutput()
	s.readPids()
	if err != nil {
		s.stop()
		return nil, "", fmt.Errorf("start.sh: %v\n%s%s", err, out, s.logs())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		s.stop()
		return nil, "", fmt.Errorf("kubeconfig from start.sh: %v\n%s", err, out)
	}
	cfg.QPS, cfg.Burst = 100, 200
	s.config = cfg
	if s.client, err = kubernetes.NewForConfig(cfg); err == nil {
		s.dynamic, err = dynamic.NewForConfig(cfg)
	}
	if err != nil {
		s.stop()
		return nil, "", err
	}
	// start.sh waits a while for /readyz; a loaded host may need longer.
	for {
		body, rerr := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if rerr == nil && strings.TrimSpace(string(body)) == "ok" {
			break
		}
		if ctx.Err() != nil {
			s.stop()
			return nil, "", fmt.Errorf("kube-apiserver not ready: %v %s%s", rerr, body, s.logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s, "", nil
}

func (s *kasServer) readPids() {
	for _, f := range []string{"apiserver.pid", "etcd.pid"} {
		b, err := os.ReadFile(filepath.Join(s.dir, f))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			s.pids = append(s.pids, pid)
		}
	}
}

// logs is the tail of the server's and etcd's logs, for a failure.
func (s *kasServer) logs() string {
	var b strings.Builder
	for _, f := range []string{"apiserver.log", "etcd.log"} {
		data, _ := os.ReadFile(filepath.Join(s.dir, f))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "\n--- %s:\n%s", f, data)
	}
	return b.String()
}

// stop ends the server and etcd (the processes start.sh started, by their
// pids) and removes their folder.
func (s *kasServer) stop() {
	for _, pid := range s.pids {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
			p.Wait()
		}
	}
	os.RemoveAll(s.dir)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kas.server != nil {
		kas.server.stop()
	}
	os.Exit(code)
}

// namespace makes a namespace for one test, enforcing PodSecurity's
// restricted level, and deletes it at the end.
func (s *kasServer) namespace(t *testing.T, prefix string) string {
	t.Helper()
	return s.namespaceLabelled(t, prefix, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"})
}

// namespaceLabelled makes a namespace with labels for one test, its name
// the prefix and a number of its own: there is no namespace controller, so
// a deleted namespace stays Terminating and its name taken.
func (s *kasServer) namespaceLabelled(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	kas.namespaces++
	name := fmt.Sprintf("%s-%d", prefix, kas.namespaces)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := s.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// helm runs helm against the server.
func (s *kasServer) helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := helmEnv(t, []string{"KUBECONFIG=" + s.kubeconfig}, args...)
	return string(out), err
}

// mustHelm runs helm against the server and fails the test on an error.
func (s *kasServer) mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// within is a context for one test's calls, bounded so a hung server
// cannot hang the run.
func within(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// poll calls f every 100 ms until it returns nil or ctx is done, then
// returns f's last error.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
