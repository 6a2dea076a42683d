package e2e

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// kubectl apply of a v1alpha1 object with three distinct mistakes is refused,
// and kubectl shows all three, each by its field path as written.
func TestApplyShowsEveryMistake(t *testing.T) {
	t.Parallel()
	c := shared(t)
	manifest := strings.NewReplacer(
		"name: lbregistrar-ingress-https", "name: three-mistakes",
		"region: ap-tokyo-1", "region: Tokyo",
		`fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"`, `fingerprint: "12:34"`,
		"backendSetName: ingress", "backendSetName: ingress set!",
	).Replace(testdata(t, "seed000-single-service.yaml"))

	_, stderr, err := c.Kubectl(testContext(t), manifest, "apply", "-f", "-")
	if err == nil {
		t.Fatal("an object with three mistakes was accepted")
	}
	t.Logf("kubectl apply:\n%s", stderr)
	for _, path := range []string{"spec.apiKey.region", "spec.apiKey.fingerprint", "spec.backendSetName"} {
		if !strings.Contains(stderr, path) {
			t.Errorf("kubectl does not show %s:\n%s", path, stderr)
		}
	}
}

// A second resource claiming a (load balancer, backend set) pair that another
// one already has is refused, naming the first.
func TestSecondClaimIsRefused(t *testing.T) {
	t.Parallel()
	c := shared(t)
	first := strings.NewReplacer(
		"name: lbregistrar-ingress-https", "name: claim-first",
		"aaaaaaaaexample\n  backendSetName", "aaaaaaaaclaimed\n  backendSetName",
	).Replace(testdata(t, "seed000-single-service.yaml"))
	if !strings.Contains(first, "aaaaaaaaclaimed") {
		t.Fatal("the test manifest did not get its own load balancer")
	}
	kubectl(t, c, first, "apply", "-f", "-")
	// Admission finds claims in its cache, which learns of the first one
	// from its watch a moment later (docs/validation.md, the claim check).
	eventually.Passes(t, 10*time.Second, 20*time.Millisecond, func() error {
		return c.Webhooks.Manager.GetCache().Get(testContext(t), client.ObjectKey{Name: "claim-first"}, &v1beta1.LBRegistrar{})
	})

	second := strings.Replace(first, "name: claim-first", "name: claim-second", 1)
	_, stderr, err := c.Kubectl(testContext(t), second, "apply", "-f", "-")
	if err == nil {
		t.Fatal("a second claim on the same load balancer and backend set was accepted")
	}
	if !strings.Contains(stderr, "claim-first") {
		t.Errorf("the refusal does not name the first resource:\n%s", stderr)
	}
}

// writersRBAC lets users alice and mallory write LBRegistrars, and update
// the ingress gateway's Service the test resources register, and nothing
// else.
const writersRBAC = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lbregistrar-writer}
rules:
- apiGroups: [nodes.peppy-ratio.dev]
  resources: [lbregistrars]
  verbs: [get, create, update, patch]
- apiGroups: [""]
  resources: [services]
  resourceNames: [istio-ingressgateway]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lbregistrar-writers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lbregistrar-writer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}
`

// Two users allowed to create LBRegistrars, one of whom may also read the
// API key Secret: only that one may name it. lbregistrar signs OCI calls
// with the key a resource names, so naming a key must take the right to
// read it.
func TestOnlyReadersOfAKeyMayNameIt(t *testing.T) {
	t.Parallel()
	c := shared(t)
	kubectl(t, c, `apiVersion: v1
kind: Namespace
metadata: {name: team-keys}
---
apiVersion: v1
kind: Secret
metadata: {name: team-key, namespace: team-keys}
stringData: {private-key: not-read-here}
`+writersRBAC+`---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: key-reader, namespace: team-keys}
rules:
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [team-key]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-the-key, namespace: team-keys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: key-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`, "apply", "-f", "-")
	manifest := func(name string) string {
		return strings.NewReplacer(
			"name: lbregistrar-ingress-https", "name: "+name,
			"aaaaaaaaexample\n  backendSetName", "aaaaaaaa"+name+"\n  backendSetName",
			"namespace: lbregistrar-system", "namespace: team-keys",
			"name: oci-api-key", "name: team-key",
		).Replace(testdata(t, "seed000-single-service.yaml"))
	}

	_, stderr, err := c.Kubectl(testContext(t), manifest("mallorys"), "--as=mallory", "apply", "-f", "-")
	if err == nil {
		t.Fatal("a user who may not read the API key Secret named it")
	}
	if want := "spec.apiKey.privateKey: Forbidden: mallory may not get Secret team-keys/team-key"; !strings.Contains(stderr, want) {
		t.Errorf("kubectl does not show %q:\n%s", want, stderr)
	}
	kubectl(t, c, manifest("alices"), "--as=alice", "apply", "-f", "-")
}

// A writer of LBRegistrars with its own API key and no right in another
// team's namespace may not register that team's Service, for its pods or
// for its nodes: registering would put the pods behind the writer's load
// balancer and make their readiness gates wait for it. That team's
// writer, who may update the Service, may; kubectl shows the refusal on
// the target's field.
func TestOnlyThoseWhoMayUpdateAServiceMayRegisterIt(t *testing.T) {
	t.Parallel()
	c := shared(t)
	kubectl(t, c, `apiVersion: v1
kind: Namespace
metadata: {name: shop}
`+writersRBAC+`---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: web-editor, namespace: shop}
rules:
- {apiGroups: [""], resources: [services], resourceNames: [web], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edits-web, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: web-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: api-key-reader, namespace: lbregistrar-system}
rules:
- {apiGroups: [""], resources: [secrets], resourceNames: [oci-api-key], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: api-key-readers-of-shop, namespace: lbregistrar-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: api-key-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}
`, "apply", "-f", "-")
	if out, _, err := c.Kubectl(testContext(t), "", "--as=mallory", "auth", "can-i", "get", "services", "-n", "shop"); err == nil || strings.TrimSpace(out) != "no" {
		t.Fatalf("mallory may read shop's Services (%q, %v): the test assumes she may not", out, err)
	}
	manifest := func(name, targetType string) string {
		return `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: ` + name + `}
spec:
  loadBalancerId: ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaa` + strings.ReplaceAll(name, "-", "") + `
  apiKey: {user: ocid1.user.oc1..aaaaaaaaexample, tenancy: ocid1.tenancy.oc1..aaaaaaaaexample, fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef",
    region: ap-tokyo-1, privateKey: {namespace: lbregistrar-system, secretKeyRef: {name: oci-api-key, key: private-key}}}
  services:
  - {namespace: shop, name: web, port: http, backendSetName: web, weight: 1, targetType: ` + targetType + `}
`
	}
	const refusal = "spec.services[0].name: Forbidden: mallory may not update Service shop/web"
	for _, targetType := range []string{"Pod", "NodePort"} {
		_, stderr, err := c.Kubectl(testContext(t), manifest("mallorys-"+strings.ToLower(targetType), targetType), "--as=mallory", "create", "-f", "-")
		if err == nil || !strings.Contains(stderr, refusal) {
			t.Errorf("registering another team's Service (%s): want %q; err=%v stderr:\n%s", targetType, refusal, err, stderr)
		}
	}
	kubectl(t, c, manifest("alices-shop", "Pod"), "--as=alice", "create", "-f", "-")
}

// Two users allowed to create LBRegistrars, one of whom may also create
// tokens for a ServiceAccount and use the controller's own identity: only
// that one may name them. The controller's own identity is refused to
// everyone, the cluster's admin included, unless serve allows it.
func TestOnlyThoseWhoMayUseAnIdentityMayNameIt(t *testing.T) {
	t.Parallel()
	manifest := func(name, identity string) string {
		return `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: ` + name + `}
spec:
  loadBalancerId: ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaa` + strings.ReplaceAll(name, "-", "") + `
  services:
  - {nodePort: 30080, backendSetName: web, weight: 1}
` + identity
	}
	ofServiceAccount := "  workloadIdentity:\n    region: ap-tokyo-1\n    serviceAccount: {namespace: team-a, name: lb-writer}\n"
	ofController := "  workloadIdentity:\n    region: ap-tokyo-1\n"
	ofInstance := "  instancePrincipal:\n    region: ap-tokyo-1\n"

	_, stderr, err := shared(t).Kubectl(testContext(t), manifest("closed", ofController), "apply", "-f", "-")
	if want := "spec.workloadIdentity: Forbidden: lbregistrar serve does not let resources sign in as the controller itself (--allow-controller-identity)"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("want %q; err=%v stderr:\n%s", want, err, stderr)
	}

	c := kube.Start(t, kube.Options{Webhooks: kube.WebhookOptions{Identities: webhook.IdentityPolicy{AllowControllerIdentity: true}}})
	kubectl(t, c, `apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lb-writer, namespace: team-a}
`+writersRBAC+`---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lb-writer-tokens, namespace: team-a}
rules:
- apiGroups: [""]
  resources: [serviceaccounts/token]
  resourceNames: [lb-writer]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-signs-in-as-lb-writer, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lb-writer-tokens}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lbregistrar-controller-identity}
rules:
- apiGroups: [nodes.peppy-ratio.dev]
  resources: [identities]
  resourceNames: [controller]
  verbs: [use]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-signs-in-as-the-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lbregistrar-controller-identity}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`, "apply", "-f", "-")

	for _, tc := range []struct{ name, identity, refusal string }{
		{"sa", ofServiceAccount, "spec.workloadIdentity.serviceAccount: Forbidden: mallory may not create tokens for ServiceAccount team-a/lb-writer"},
		{"controller", ofController, "spec.workloadIdentity: Forbidden: mallory may not sign in as the lbregistrar controller"},
		{"instance", ofInstance, "spec.instancePrincipal: Forbidden: mallory may not sign in as the lbregistrar controller"},
	} {
		_, stderr, err := c.Kubectl(testContext(t), manifest("mallorys-"+tc.name, tc.identity), "--as=mallory", "apply", "-f", "-")
		if err == nil || !strings.Contains(stderr, tc.refusal) {
			t.Errorf("want %q; err=%v stderr:\n%s", tc.refusal, err, stderr)
		}
		kubectl(t, c, manifest("alices-"+tc.name, tc.identity), "--as=alice", "apply", "-f", "-")
	}
}

// A tenant who may create LBRegistrars, update her own and read her API
// key may not take another team's backend set by naming its resource in
// nodes.peppy-ratio.dev/replaces: not on create, nor by annotating her own
// resource later, a write that leaves the spec alone. That team's admin,
// who may update the resource, may; kubectl shows each refusal on the
// annotation. Once the replaced resource is deleted, its name is free, and
// a resource created under it later is not the one replaced.
func TestOnlyThoseWhoMayUpdateAResourceMayReplaceIt(t *testing.T) {
	t.Parallel()
	c := shared(t)
	kubectl(t, c, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lbregistrar-creator}
rules:
- {apiGroups: [nodes.peppy-ratio.dev], resources: [lbregistrars], verbs: [create]}
- {apiGroups: [""], resources: [services], resourceNames: [istio-ingressgateway], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lbregistrar-creators}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lbregistrar-creator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: erins-lbregistrars}
rules:
- {apiGroups: [nodes.peppy-ratio.dev], resources: [lbregistrars], resourceNames: [erins], verbs: [get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: erins-lbregistrars}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: erins-lbregistrars}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: team-a-lbregistrars}
rules:
- {apiGroups: [nodes.peppy-ratio.dev], resources: [lbregistrars], resourceNames: [team-a-ingress, team-a-next], verbs: [get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: team-a-lbregistrars}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: team-a-lbregistrars}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: api-key-reader, namespace: lbregistrar-system}
rules:
- {apiGroups: [""], resources: [secrets], resourceNames: [oci-api-key], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: api-key-readers, namespace: lbregistrar-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: api-key-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}
`, "apply", "-f", "-")
	manifest := func(name, backendSet, replaces string) string {
		return strings.NewReplacer(
			"name: lbregistrar-ingress-https", "name: "+name+"\n  annotations: {nodes.peppy-ratio.dev/replaces: '"+replaces+"'}",
			"aaaaaaaaexample\n  backendSetName: ingress", "aaaaaaaateama\n  backendSetName: "+backendSet,
		).Replace(testdata(t, "seed000-single-service.yaml"))
	}
	kubectl(t, c, manifest("team-a-ingress", "ingress", ""), "apply", "-f", "-")

	const refusal = `metadata.annotations[nodes.peppy-ratio.dev/replaces]: Forbidden: erin may not update LBRegistrar team-a-ingress`
	_, stderr, err := c.Kubectl(testContext(t), manifest("erins", "ingress", "team-a-ingress"), "--as=erin", "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, refusal) {
		t.Errorf("creating a resource that replaces team A's: want %q; err=%v stderr:\n%s", refusal, err, stderr)
	}
	kubectl(t, c, manifest("erins", "edge", ""), "--as=erin", "apply", "-f", "-")
	_, stderr, err = c.Kubectl(testContext(t), "", "--as=erin", "annotate", "lbregistrar", "erins", "--overwrite", "nodes.peppy-ratio.dev/replaces=team-a-ingress")
	if err == nil || !strings.Contains(stderr, refusal) {
		t.Errorf("annotating her resource later: want %q; err=%v stderr:\n%s", refusal, err, stderr)
	}

	kubectl(t, c, manifest("team-a-next", "ingress", "team-a-ingress"), "--as=frank", "apply", "-f", "-")

	// The hand-over done, team A's old resource is deleted: whoever takes
	// its name gets nothing from the annotation that still names it. A
	// resource created in the same second as the replacement would count as
	// replaced (creation times are whole seconds), so the takeover comes, as
	// it would, later.
	var next v1beta1.LBRegistrar
	if err := c.Client.Get(testContext(t), client.ObjectKey{Name: "team-a-next"}, &next); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(next.CreationTimestamp.Add(time.Second)))
	kubectl(t, c, "", "delete", "lbregistrar", "team-a-ingress")
	const claimed = `already claimed by LBRegistrar "team-a-next"`
	_, stderr, err = c.Kubectl(testContext(t), manifest("team-a-ingress", "ingress", ""), "--as=erin", "create", "-f", "-")
	if err == nil || !strings.Contains(stderr, claimed) {
		t.Errorf("taking the freed name of a replaced resource: want %q; err=%v stderr:\n%s", claimed, err, stderr)
	}
}

// An on-call engineer who may update and delete LBRegistrars, and read no
// API key, may pause a resource and have its deletion keep its backends:
// suspend and deletionPolicy name nothing to sign in with. Editing what it
// registers still takes the key; deleting it takes delete alone.
func TestPausingTakesNoMoreThanDeleting(t *testing.T) {
	t.Parallel()
	c := shared(t)
	kubectl(t, c, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lbregistrar-on-call}
rules:
- {apiGroups: [nodes.peppy-ratio.dev], resources: [lbregistrars], verbs: [get, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lbregistrar-on-call}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lbregistrar-on-call}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: oscar}]
`, "apply", "-f", "-")
	kubectl(t, c, strings.NewReplacer(
		"name: lbregistrar-ingress-https", "name: paused-by-on-call",
		"aaaaaaaaexample\n  backendSetName", "aaaaaaaaoncall\n  backendSetName",
	).Replace(testdata(t, "seed000-single-service.yaml")), "apply", "-f", "-")
	const resource = "lbregistrars.v1beta1.nodes.peppy-ratio.dev/paused-by-on-call"

	kubectl(t, c, "", "--as=oscar", "patch", resource, "--type=merge", "-p", `{"spec":{"suspend":true,"deletionPolicy":"Orphan"}}`)
	kubectl(t, c, "", "--as=oscar", "patch", resource, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	_, stderr, err := c.Kubectl(testContext(t), "", "--as=oscar", "patch", resource, "--type=json", "-p", `[{"op":"replace","path":"/spec/services/0/weight","value":5}]`)
	if want := "oscar may not get Secret lbregistrar-system/oci-api-key"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("a change of what it registers: want %q; err=%v stderr:\n%s", want, err, stderr)
	}
	kubectl(t, c, "", "--as=oscar", "delete", resource)
}
