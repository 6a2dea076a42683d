package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// docShell runs the shell blocks of the docs as a user types them: bash, in
// a directory of the user's own that contains the repository's config/ and
// charts/, and bin/lbregistrar as make build leaves it, with bin/'s kubectl
// and helm and lbregistrar on PATH, and the cluster's admin kubeconfig as
// ~/.kube/config.
type docShell struct {
	dir string
	env []string
}

func newDocShell(t *testing.T, c *kube.Cluster) docShell {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	errs := []error{os.MkdirAll(filepath.Join(home, ".kube"), 0o700), os.MkdirAll(filepath.Join(dir, "bin"), 0o700),
		os.Symlink(lbregistrar(t), filepath.Join(dir, "bin", "lbregistrar")),
		os.Symlink(filepath.Join(c.Root, "config"), filepath.Join(dir, "config")),
		os.Symlink(filepath.Join(c.Root, "charts"), filepath.Join(dir, "charts"))}
	errs = append(errs, os.WriteFile(filepath.Join(home, ".kube", "config"), kubeconfig, 0o600))
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	path := strings.Join([]string{filepath.Join(c.Root, "bin"), filepath.Dir(lbregistrar(t)), os.Getenv("PATH")}, string(os.PathListSeparator))
	return docShell{dir: dir, env: []string{"PATH=" + path, "HOME=" + home, "KUBECONFIG=" + filepath.Join(home, ".kube", "config")}}
}

// write writes a file of the user's, at path under the shell's directory.
func (s docShell) write(t *testing.T, path, content string) {
	t.Helper()
	path = filepath.Join(s.dir, path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// run runs the block of file marked `<!-- e2e: name -->`, with each
// placeholder of replace (old, new, ...) filled in, and returns what it
// printed; the test fails when the block does.
func (s docShell) run(t *testing.T, file, name string, replace ...string) string {
	t.Helper()
	out, err := s.try(t, file, name, replace...)
	if err != nil {
		t.Fatalf("%s, block %q: %v\n%s", file, name, err, out)
	}
	return out
}

// try is run that returns the block's failure.
func (s docShell) try(t *testing.T, file, name string, replace ...string) (string, error) {
	t.Helper()
	block := strings.NewReplacer(replace...).Replace(docBlock(t, file, name))
	cmd := exec.CommandContext(testContext(t), "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	t.Logf("%s, block %q:\n%s\n%s", file, name, block, out)
	return string(out), err
}

// docMarker is the comment that names the shell block after it, for a test
// to run, or says why no test runs it.
var docMarker = regexp.MustCompile(`^\s*<!-- (e2e|not run): (.+) -->$`)

// docBlock is the fenced block after file's `<!-- e2e: name -->`, unindented.
func docBlock(t *testing.T, file, name string) string {
	t.Helper()
	lines := strings.Split(readRootFile(t, file), "\n")
	for i, line := range lines {
		if m := docMarker.FindStringSubmatch(line); m == nil || m[1] != "e2e" || m[2] != name {
			continue
		}
		fence := lines[i+1]
		indent := len(fence) - len(strings.TrimLeft(fence, " "))
		var block []string
		for _, l := range lines[i+2:] {
			if strings.TrimSpace(l) == "```" {
				return strings.Join(block, "\n")
			}
			block = append(block, l[min(indent, len(l)-len(strings.TrimLeft(l, " "))):])
		}
	}
	t.Fatalf("%s has no block marked %q", file, name)
	return ""
}

// Every shell block of README.md and docs/ is run by a test, marked
// `<!-- e2e: NAME -->` for a docShell.run of its file and NAME, or says why
// none can (`<!-- not run: ... -->`): the docs name only commands a test
// has typed.
func TestDocsShellBlocksAreRun(t *testing.T) {
	t.Parallel()
	sources := ""
	tests, _ := filepath.Glob(filepath.Join(mustRoot(t), "test", "e2e", "*_test.go"))
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources += string(b)
	}
	docs, _ := filepath.Glob(filepath.Join(mustRoot(t), "docs", "*.md"))
	for _, path := range append([]string{filepath.Join(mustRoot(t), "README.md")}, docs...) {
		file, _ := filepath.Rel(mustRoot(t), path)
		lines := strings.Split(readRootFile(t, file), "\n")
		for i, line := range lines {
			if !slices.Contains([]string{"```sh", "```bash", "```console"}, strings.TrimSpace(line)) {
				continue
			}
			m := docMarker.FindStringSubmatch(lines[max(i-1, 0)])
			switch {
			case m == nil:
				t.Errorf("%s:%d: a shell block no test runs; mark it <!-- e2e: NAME --> and run it, or say why not", file, i+1)
			case m[1] == "e2e" && !strings.Contains(sources, fmt.Sprintf("%q, %q", file, m[2])):
				t.Errorf("%s:%d: no test runs the block marked %q", file, i+1, m[2])
			}
		}
	}
}

// standIn does for a cluster with no nodes what its kubelet, Service
// network, deployment and namespace controllers would for lbregistrar:
// runs the replicas of its Deployment as serve processes with the
// Deployment's own arguments and service account (replaced when an apply
// changes them), routes its webhook Service to them, reports the
// Deployment rolled out once they are ready, and finalizes deleted
// namespaces.
//
// The API server here cannot reach a Service, so routing rewrites the
// webhooks' service references to the replicas' URL; while a user's
// command applies lbregistrar's own objects (see applying), the references
// are as written, so the command patches what it wrote.
type standIn struct {
	c        *kube.Cluster
	emu      *ociemu.Emulator
	service  *kube.ServiceProxy
	clients  kubernetes.Interface
	mu       sync.Mutex
	replicas []serveProcess
	template string // the arguments and environment the replicas run with
	paused   bool
	routed   map[string]apiextensionsv1.ServiceReference // by webhook name ("" for the CRD's conversion)
}

func newStandIn(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator) *standIn {
	t.Helper()
	clients, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{c: c, emu: emu, service: newServiceProxy(t), clients: clients, routed: map[string]apiextensionsv1.ServiceReference{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s.route(ctx)
			s.rollOut(ctx)
			s.finalizeNamespaces(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// startReplicas starts the Deployment's replicas, as its service account,
// and returns once they serve.
func (s *standIn) startReplicas(t *testing.T) {
	t.Helper()
	ctx := testContext(t)
	var d appsv1.Deployment
	if err := s.c.Client.Get(ctx, client.ObjectKey{Namespace: kube.Namespace, Name: "lbregistrar"}, &d); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := s.c.KubeconfigAs("system:serviceaccount:"+kube.Namespace+":"+d.Spec.Template.Spec.ServiceAccountName, "deployment.kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	args, env := s.replicaOf(&d)
	var started []serveProcess
	for range ptr.Deref(d.Spec.Replicas, 1) {
		r := newServeProcess()
		r.Env = env
		r.launch(t, kubeconfig, args...)
		started = append(started, r)
	}
	for _, r := range started {
		r.waitListening(t)
		s.service.AddBackend(r.WebhookAddr)
	}
	for _, r := range started {
		r.waitReady(t)
	}
	s.mu.Lock()
	s.replicas, s.template = started, fmt.Sprint(args, env)
	s.mu.Unlock()
}

// replicaOf is what a replica of d runs with: each listens where the
// harness says, on loopback; the rest of its arguments and its
// environment are the Deployment's.
func (s *standIn) replicaOf(d *appsv1.Deployment) (args, env []string) {
	own := func(a string) bool {
		return a == "serve" || slices.ContainsFunc([]string{"--webhook-addr=", "--metrics-addr=", "--health-addr=", "--metrics-secure="},
			func(flag string) bool { return strings.HasPrefix(a, flag) })
	}
	args = append(slices.DeleteFunc(slices.Clone(d.Spec.Template.Spec.Containers[0].Args), own),
		"--webhook-host=127.0.0.1", "--oci-loadbalancer-endpoint="+s.emu.URL(), "--oci-networkloadbalancer-endpoint="+s.emu.URL(), "--oci-core-endpoint="+s.emu.URL())
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			value = d.Namespace
		}
		env = append(env, e.Name+"="+value)
	}
	return args, env
}

// replaceChanged replaces the replicas when their Deployment now runs
// other arguments or environment, as a rolling update does: the new ones
// first, so a webhook answers throughout, then the old ones stopped.
func (s *standIn) replaceChanged(t *testing.T) {
	t.Helper()
	var d appsv1.Deployment
	if err := s.c.Client.Get(testContext(t), client.ObjectKey{Namespace: kube.Namespace, Name: "lbregistrar"}, &d); err != nil {
		return // uninstalled
	}
	s.mu.Lock()
	old, template := s.replicas, s.template
	s.mu.Unlock()
	if args, env := s.replicaOf(&d); len(old) == 0 || fmt.Sprint(args, env) == template {
		return
	}
	s.startReplicas(t)
	for _, r := range old {
		s.service.RemoveBackend(r.WebhookAddr)
		r.Stop()
	}
}

// applying runs command, which applies lbregistrar's own objects, with
// the webhooks' service references as written; then rolls the replicas if
// it changed their Deployment, and routes the references again.
func (s *standIn) applying(t *testing.T, command func()) {
	t.Helper()
	ctx := testContext(t)
	s.mu.Lock()
	s.paused = true
	s.unroute(ctx)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.paused = false
		s.mu.Unlock()
	}()
	command()
	s.replaceChanged(t)
}

// route points the CRD's conversion webhook and the validating webhooks,
// wherever they name lbregistrar's Service, at the replicas.
func (s *standIn) route(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return
	}
	s.rewrite(ctx, func(name string, svc *apiextensionsv1.ServiceReference, url *string) (*apiextensionsv1.ServiceReference, *string) {
		if svc == nil {
			return svc, url
		}
		s.routed[name] = *svc
		return nil, ptr.To("https://" + s.service.Addr() + ptr.Deref(svc.Path, ""))
	})
}

// unroute puts back the service references route replaced.
func (s *standIn) unroute(ctx context.Context) {
	s.rewrite(ctx, func(name string, svc *apiextensionsv1.ServiceReference, url *string) (*apiextensionsv1.ServiceReference, *string) {
		if was, ok := s.routed[name]; ok && svc == nil {
			return &was, nil
		}
		return svc, url
	})
}

// rewrite sets each webhook's client config to what change makes of it.
func (s *standIn) rewrite(ctx context.Context, change func(name string, svc *apiextensionsv1.ServiceReference, url *string) (*apiextensionsv1.ServiceReference, *string)) {
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := s.c.Client.Get(ctx, client.ObjectKey{Name: kube.CRDName}, &crd); err != nil || crd.Spec.Conversion == nil ||
			crd.Spec.Conversion.Webhook == nil || crd.Spec.Conversion.Webhook.ClientConfig == nil {
			return err
		}
		config := crd.Spec.Conversion.Webhook.ClientConfig
		svc, url := change("", config.Service, config.URL)
		if svc == config.Service && url == config.URL {
			return nil
		}
		config.Service, config.URL = svc, url
		return s.c.Client.Update(ctx, &crd)
	})
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := s.c.Client.Get(ctx, client.ObjectKey{Name: "lbregistrar-validating"}, &vwc); err != nil {
			return err
		}
		changed := false
		for i, w := range vwc.Webhooks {
			var svc *apiextensionsv1.ServiceReference
			if r := w.ClientConfig.Service; r != nil {
				svc = &apiextensionsv1.ServiceReference{Namespace: r.Namespace, Name: r.Name, Path: r.Path, Port: r.Port}
			}
			newSvc, url := change(w.Name, svc, w.ClientConfig.URL)
			if newSvc == svc && url == w.ClientConfig.URL {
				continue
			}
			vwc.Webhooks[i].ClientConfig.URL, vwc.Webhooks[i].ClientConfig.Service, changed = url, nil, true
			if newSvc != nil {
				vwc.Webhooks[i].ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: newSvc.Namespace,
					Name: newSvc.Name, Path: newSvc.Path, Port: newSvc.Port}
			}
		}
		if !changed {
			return nil
		}
		return s.c.Client.Update(ctx, &vwc)
	})
}

// rollOut reports lbregistrar's Deployment rolled out, once its replicas
// run.
func (s *standIn) rollOut(ctx context.Context) {
	s.mu.Lock()
	running := int32(len(s.replicas))
	s.mu.Unlock()
	var d appsv1.Deployment
	if running == 0 || s.c.Client.Get(ctx, client.ObjectKey{Namespace: kube.Namespace, Name: "lbregistrar"}, &d) != nil ||
		d.Status.ObservedGeneration == d.Generation {
		return
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: running, UpdatedReplicas: running,
		ReadyReplicas: running, AvailableReplicas: running}
	_ = s.c.Client.Status().Update(ctx, &d)
}

// finalizeNamespaces finishes deleting every namespace being deleted, as
// the namespace controller does once it has emptied one.
func (s *standIn) finalizeNamespaces(ctx context.Context) { finalizeNamespaces(ctx, s.c, s.clients) }

func finalizeNamespaces(ctx context.Context, c *kube.Cluster, clients kubernetes.Interface) {
	var namespaces corev1.NamespaceList
	if c.Client.List(ctx, &namespaces) != nil {
		return
	}
	for _, ns := range namespaces.Items {
		if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			_, _ = clients.CoreV1().Namespaces().Finalize(ctx, &ns, metav1.UpdateOptions{})
		}
	}
}

// finalizingNamespaces plays the namespace controller's last step in c,
// finalizeNamespaces, until the test ends: a bare cluster has none.
func finalizingNamespaces(t *testing.T, c *kube.Cluster) {
	t.Helper()
	clients, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			finalizeNamespaces(ctx, c, clients)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}
