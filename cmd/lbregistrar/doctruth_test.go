package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"
)

// The docs name only what exists. Every flag, metric, LBRegistrar or chart
// field, condition reason and Go identifier the README and docs/ name is
// looked up where it lives: the commands' flags, the metrics registry serve
// exports, the CRD and the chart's values schema, the module's code. A
// rename or a removal that leaves a doc behind fails make verify, which
// runs this test. CHANGELOG.md is left out: it names what was.
func TestDocsNameWhatExists(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(repo, "README.md"))
	truth := loadTruth(t)
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repo, doc)
		for _, problem := range truth.check(string(text)) {
			t.Errorf("%s: %s", name, problem)
		}
	}
}

// namedElsewhere are names the docs cite from outside this module, each
// with where it is from, so that citing one is a decision.
var namedElsewhere = map[string]string{
	// Other tools' flags.
	"--reset-then-reuse-values":       "helm upgrade",
	"--reuse-values":                  "helm upgrade",
	"--force-conflicts":               "helm install (Helm 4)",
	"--admission-control-config-file": "kube-apiserver",
	"--set":                           "helm install and upgrade",
	"--api-version":                   "kubectl explain",
	// OCI's API and SDK.
	"DefaultCircuitBreakerSettingWithServiceName": "oci-go-sdk common",
	"IdentityClient":                         "oci-go-sdk identity",
	"UploadApiKey":                           "oci-go-sdk identity",
	"LifecycleStateEnum":                     "oci-go-sdk",
	"RelatedResourceNotAuthorizedOrNotFound": "OCI's error codes",
	"podNsgIds":                              "OKE virtual node pools",
	"getBackendSets":                         "oci-cloud-controller-manager",
	"defaultBackendSetName":                  "oci-cloud-controller-manager",
	// The original operator, norseto/oci-lb-controller.
	"registerMultipleServices": "norseto/oci-lb-controller",
	"getNodesForService":       "norseto/oci-lb-controller",
	"getNodePortFromService":   "norseto/oci-lb-controller",
	"determinePort":            "norseto/oci-lb-controller",
	"RegisterBackends":         "norseto/oci-lb-controller",
	"GetIPAddress":             "norseto/oci-lb-controller",
	"notReadyAddresses":        "core/v1 Endpoints, which norseto/oci-lb-controller read",
	"nodeName":                 "core/v1 Endpoints, which norseto/oci-lb-controller read",
	// Kubernetes and its tools.
	"reconcileID":                   "controller-runtime's log fields",
	"requeue_after":                 "controller-runtime's log fields",
	"AlreadyExists":                 "the API server's status reasons",
	"ExternalName":                  "core/v1 ServiceTypeExternalName",
	"TaintNodeShutdown":             "k8s.io/cloud-provider/api",
	"bearerTokenFile":               "monitoring.coreos.com/v1 ServiceMonitor",
	"ReconcilePaused":               "Crossplane's Synced reason",
	"KubernetesProxymuxServicePort": "oci-go-sdk common/auth",
	"getBackendSetNamePortMap":      "oci-cloud-controller-manager",
	"getBackends":                   "oci-cloud-controller-manager",
	"DefaultRetryPolicy":            "oci-go-sdk common",
	"appVersion":                    "Helm's Chart.yaml",
	"matchCondition":                "admissionregistration/v1 MatchCondition",
	// Upstream code the rules cite.
	"ShutdownStatus":           "kubelet's nodeshutdown manager",
	"nodestatus":               "kubelet's pkg/kubelet/nodestatus",
	"ReadyCondition":           "kubelet's pkg/kubelet/nodestatus",
	"NodeExternalIp":           "oci-cloud-controller-manager util.go",
	"extractNodeAddresses":     "oci-cloud-controller-manager",
	"CategorizeEndpoints":      "kube-proxy pkg/proxy/topology.go",
	"getLocalReadyEndpointIPs": "kube-proxy",
}

// worldKinds are the Kubernetes kinds the docs describe besides
// LBRegistrar, and worldModels OCI's models lbregistrar reads and writes:
// their JSON fields and Go fields exist.
var (
	worldKinds = []any{corev1.Node{}, corev1.Pod{}, corev1.Service{}, corev1.Secret{}, discoveryv1.EndpointSlice{},
		appsv1.Deployment{}, batchv1.Job{}, policyv1.PodDisruptionBudget{}, rbacv1.Role{}, networkingv1.NetworkPolicy{},
		admissionregistrationv1.ValidatingWebhookConfiguration{}, admissionregistrationv1.MutatingWebhookConfiguration{},
		apiextensionsv1.CustomResourceDefinition{}}
	worldModels = []any{loadbalancer.LoadBalancer{}, loadbalancer.BackendSet{}, loadbalancer.BackendSetDetails{},
		loadbalancer.UpdateBackendSetDetails{}, loadbalancer.WorkRequest{}, loadbalancer.BackendSetHealth{},
		loadbalancer.BackendHealth{}, loadbalancer.BackendDetails{},
		networkloadbalancer.NetworkLoadBalancer{}, networkloadbalancer.BackendSet{}, networkloadbalancer.UpdateBackendSetDetails{}, networkloadbalancer.WorkRequest{},
		networkloadbalancer.WorkRequestError{}, networkloadbalancer.BackendSetHealth{}, networkloadbalancer.BackendHealth{},
		networkloadbalancer.CreateNetworkLoadBalancerDetails{}, networkloadbalancer.BackendDetails{}}
)

// truth is what exists, for a doc to name.
type truth struct {
	flags    map[string][]string // by command path ("lbregistrar plan"); "" has every command's
	names    map[string]bool     // identifiers declared or used in the module's code, its identifier-like strings, CRD fields, alerts
	literals map[string]bool     // field paths the code spells in strings (field indexes)
	packages map[string]map[string]bool
	members  map[string]map[string]bool // fields and methods, by type name
	crd      []map[string]any           // each version's openAPIV3Schema
	values   map[string]any             // the chart's values schema
}

func loadTruth(t *testing.T) *truth {
	t.Helper()
	tr := &truth{flags: map[string][]string{}, names: map[string]bool{}, literals: map[string]bool{}, packages: map[string]map[string]bool{}, members: map[string]map[string]bool{}}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		var flags []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, "--"+f.Name) })
		cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, "--"+f.Name) })
		flags = append(flags, "--help")
		tr.flags[cmd.CommandPath()] = flags
		tr.flags[""] = append(tr.flags[""], flags...)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultVersionFlag()
	root.InitDefaultCompletionCmd()
	walk(root)

	if err := tr.readCode(repo); err != nil {
		t.Fatal(err)
	}
	seen := map[reflect.Type]bool{}
	for _, v := range append(slices.Clone(worldKinds), worldModels...) {
		tr.addFields(reflect.TypeOf(v), seen)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(repoFile(t, "config/crd/bases/nodes.peppy-ratio.dev_lbregistrars.yaml"), &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		tr.crd = append(tr.crd, v.Schema.OpenAPIV3Schema)
		tr.addPropertyNames(v.Schema.OpenAPIV3Schema)
	}
	if err := json.Unmarshal(repoFile(t, "charts/lbregistrar/values.schema.json"), &tr.values); err != nil {
		t.Fatal(err)
	}
	tr.addPropertyNames(tr.values)
	for _, alert := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)$`).FindAllSubmatch(repoFile(t, "config/prometheus/prometheusrule.yaml"), -1) {
		tr.names[string(alert[1])] = true
	}
	return tr
}

func repoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// registered says whether serve's metrics registry has metric (a
// histogram's series by their family): registering a collector of that
// name fails when one is there. The registry lists no family until a
// series of it is observed, so asking it is the only way to know.
func registered(metric string) bool {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if family, ok := strings.CutSuffix(metric, suffix); ok && registered(family) {
			return true
		}
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: metric, Help: "probe"})
	if err := crmetrics.Registry.Register(probe); err != nil {
		return true
	}
	crmetrics.Registry.Unregister(probe)
	return false
}

// readCode reads every Go file under root: the names it declares (by
// package, and members by type) and every identifier and identifier-like
// string its code uses. Comments count for nothing.
func (tr *truth) readCode(root string) error {
	identifierLike := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	fieldPathLike := regexp.MustCompile(`^(spec|status)(\.[A-Za-z]+)+$`)
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		declared := tr.packages[file.Name.Name]
		if declared == nil {
			declared = map[string]bool{}
			tr.packages[file.Name.Name] = declared
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				tr.names[n.Name] = true
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && identifierLike.MatchString(s) {
					tr.names[s] = true
				} else if err == nil && n.Kind == token.STRING && fieldPathLike.MatchString(s) {
					tr.literals[s] = true // a field index's name
				}
			case *ast.FuncDecl:
				if n.Recv == nil {
					declared[n.Name.Name] = true
				} else {
					tr.member(receiverType(n.Recv.List[0].Type), n.Name.Name)
				}
			case *ast.TypeSpec:
				declared[n.Name.Name] = true
				switch typ := n.Type.(type) {
				case *ast.StructType:
					for _, f := range typ.Fields.List {
						for _, name := range f.Names {
							tr.member(n.Name.Name, name.Name)
						}
						if f.Tag != nil {
							tag, _ := strconv.Unquote(f.Tag.Value)
							if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ","); name != "" && name != "-" {
								tr.names[name] = true
							}
						}
						if len(f.Names) == 0 { // embedded: its members are promoted, its name is a field
							tr.member(n.Name.Name, receiverType(f.Type))
						}
					}
				case *ast.InterfaceType:
					for _, m := range typ.Methods.List {
						for _, name := range m.Names {
							tr.member(n.Name.Name, name.Name)
						}
					}
				}
			case *ast.ValueSpec:
				for _, name := range n.Names {
					declared[name.Name] = true
				}
			}
			return true
		})
		return nil
	})
}

func (tr *truth) member(typ, name string) {
	if tr.members[typ] == nil {
		tr.members[typ] = map[string]bool{}
	}
	tr.members[typ][name] = true
}

// receiverType is the type name of a receiver or embedded field: T, *T,
// T[P], pkg.T.
func receiverType(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// addFields counts typ's JSON and Go field names, and those of the types
// it contains, as existing.
func (tr *truth) addFields(typ reflect.Type, seen map[reflect.Type]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] {
		return
	}
	seen[typ] = true
	for i := range typ.NumField() {
		f := typ.Field(i)
		tr.member(typ.Name(), f.Name)
		if name := jsonName(f); name != "" {
			tr.names[name] = true
		}
		tr.addFields(f.Type, seen)
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// kindHasPath says whether the kind of typ has the dotted JSON path
// ("spec.providerID").
func kindHasPath(typ reflect.Type, path []string) bool {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if len(path) == 0 {
		return true
	}
	if typ.Kind() != reflect.Struct {
		return false
	}
	seg := strings.TrimSuffix(path[0], "[]")
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch name := jsonName(f); {
		case f.Anonymous && name == "" && kindHasPath(f.Type, path):
			return true
		case name == seg && kindHasPath(f.Type, path[1:]):
			return true
		}
	}
	return false
}

func (tr *truth) addPropertyNames(schema map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	for name, sub := range props {
		tr.names[name] = true
		if m, ok := sub.(map[string]any); ok {
			tr.addPropertyNames(m)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		tr.addPropertyNames(items)
	}
	if defs, ok := schema["definitions"].(map[string]any); ok {
		for _, def := range defs {
			if m, ok := def.(map[string]any); ok {
				tr.addPropertyNames(m)
			}
		}
	}
}

// hasPath says whether schema has the dotted path ("services[].port");
// root has the definitions its $refs name.
func hasPath(root, schema map[string]any, path []string) bool {
	if ref, ok := schema["$ref"].(string); ok {
		defs, _ := root["definitions"].(map[string]any)
		schema, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	if len(path) == 0 {
		return true
	}
	if schema["properties"] == nil && schema["additionalProperties"] != nil {
		return true // a map: any key
	}
	seg, list := strings.CutSuffix(path[0], "[]")
	props, _ := schema["properties"].(map[string]any)
	sub, ok := props[seg].(map[string]any)
	if !ok {
		return false
	}
	if items, ok := sub["items"].(map[string]any); ok && (list || len(path) > 1) {
		sub = items
	} else if list {
		return false
	}
	return hasPath(root, sub, path[1:])
}

var (
	fence       = regexp.MustCompile("(?m)^\\s*```(.*)$")
	qualified   = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)\b`)
	span        = regexp.MustCompile("`([^`]+)`")
	flagRef     = regexp.MustCompile(`(?:^|[\s\[(="'])(--[a-z][a-z0-9-]*)`)
	metricRef   = regexp.MustCompile(`\b(?:lbregistrar|controller_runtime|workqueue|rest_client|certwatcher)_[a-z0-9_]*[a-z0-9]\b`)
	fileName    = regexp.MustCompile(`^\.(go|ya?ml|md|json|lua|sh|txt|pem)\b`)
	notGo       = regexp.MustCompile(`^v?X\.Y\.Z$|^[A-Z0-9_]+$|^[a-z0-9]+(_[a-z0-9]+)+$|\.(go|ya?ml|md|json|lua|sh|txt|pem)$`)
	identifiers = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[\]|\(\))?(\.[A-Za-z_][A-Za-z0-9_]*(\[\]|\(\))?)*$`)
	camel       = regexp.MustCompile(`[a-z0-9][A-Z]`)
	comment     = regexp.MustCompile(`(^|\s)#.*$`)
	commandSep  = regexp.MustCompile(`\|\||&&|[|;]|\$\(`)
)

// check lists what doc names that does not exist.
func (tr *truth) check(doc string) []string {
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	parts, infos := fence.Split(doc, -1), fence.FindAllStringSubmatch(doc, -1)
	var prose, code []string
	for i, part := range parts {
		switch {
		case i%2 == 0:
			prose = append(prose, part)
		case infos[i-1][1] == "": // a drawing of the code: its pkg.Name exist
			for _, m := range qualified.FindAllStringSubmatch(part, -1) {
				if declared := tr.packages[m[1]]; declared != nil && m[2] != "go" && !tr.inPackage(m[1], m[2]) {
					problem("%s.%s: package %s declares no %s", m[1], m[2], m[1], m[2])
				}
			}
		default:
			code = append(code, part)
		}
	}

	for _, m := range metricRef.FindAllStringIndex(doc, -1) {
		name := doc[m[0]:m[1]]
		if fileName.MatchString(doc[m[1]:]) || strings.HasSuffix(doc[:m[0]], "/") {
			continue
		}
		if !registered(name) {
			problem("metric %s is not registered", name)
		}
	}
	for _, block := range code {
		for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
			line = comment.ReplaceAllString(line, "")
			if arg, ok := strings.CutPrefix(strings.TrimSpace(line), "- --"); ok { // a container's args
				problems = append(problems, tr.checkFlags("", "--"+arg)...)
				continue
			}
			for _, segment := range commandSep.Split(line, -1) {
				if command, ok := tr.lbregistrarCommand(segment); ok {
					problems = append(problems, tr.checkFlags(command, segment)...)
				}
			}
		}
	}
	for _, m := range span.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		text := strings.Join(strings.Fields(m[1]), " ")
		if command, ok := tr.lbregistrarCommand(text); ok {
			problems = append(problems, tr.checkFlags(command, text)...)
			continue
		}
		if strings.HasPrefix(text, "--") || strings.Contains(text, " --") {
			if first := strings.Fields(text)[0]; !strings.HasPrefix(first, "--") && first != "serve" && first != "plan" {
				continue // another tool's command line
			}
			problems = append(problems, tr.checkFlags("", text)...)
			continue
		}
		if why := tr.checkName(strings.TrimSuffix(text, "()")); why != "" {
			problem("%s", why)
		}
	}
	return problems
}

// lbregistrarCommand is the command path of the lbregistrar command line
// segment runs, if it runs one.
func (tr *truth) lbregistrarCommand(segment string) (string, bool) {
	words := strings.Fields(segment)
	for len(words) > 0 && strings.Contains(words[0], "=") { // VAR=value before the command
		words = words[1:]
	}
	if len(words) == 0 || filepath.Base(words[0]) != "lbregistrar" {
		return "", false
	}
	path := "lbregistrar"
	for _, w := range words[1:] {
		if _, ok := tr.flags[path+" "+w]; !ok {
			break
		}
		path += " " + w
	}
	return path, true
}

// checkFlags lists the flags text names that command (every command, when
// empty) does not have.
func (tr *truth) checkFlags(command, text string) []string {
	var problems []string
	for _, m := range flagRef.FindAllStringSubmatch(" "+text, -1) {
		flag := m[1]
		switch {
		case slices.Contains(tr.flags[command], flag):
		case command == "" && namedElsewhere[flag] != "":
		case command == "":
			problems = append(problems, fmt.Sprintf("flag %s: no command of lbregistrar has it", flag))
		default:
			problems = append(problems, fmt.Sprintf("flag %s: %s has no such flag", flag, command))
		}
	}
	return problems
}

// checkName says what is wrong with a span that names a field or a Go
// identifier; nothing for spans that name neither.
func (tr *truth) checkName(text string) string {
	if !identifiers.MatchString(text) {
		return ""
	}
	segments := strings.Split(text, ".")
	for i := range segments {
		segments[i] = strings.TrimSuffix(strings.TrimSuffix(segments[i], "()"), "[]")
	}
	if namedElsewhere[text] != "" {
		return ""
	}
	if notGo.MatchString(text) {
		return "" // an environment variable, an enum value, a metric or log field, a file
	}
	first := segments[0]
	if len(segments) > 1 && (first == "spec" || first == "status" || first == "metadata") {
		if second := segments[1]; second[0] >= 'a' && second[0] <= 'z' { // else the Go package status
			return tr.checkField(text)
		}
	}
	switch {
	case len(segments) > 1 && tr.values["properties"].(map[string]any)[first] != nil && hasPath(tr.values, tr.values, segments):
		return ""
	case len(segments) > 1 && tr.values["properties"].(map[string]any)[first] != nil && tr.packages[first] == nil:
		return fmt.Sprintf("chart value %s: the values schema has no such key", text)
	case len(segments) > 1 && tr.packages[first] != nil:
		if !tr.inPackage(first, segments[1]) {
			return fmt.Sprintf("%s: package %s declares no %s", text, first, segments[1])
		}
		return tr.checkMembers(segments[1:], text)
	case len(segments) > 1 && tr.members[first] != nil:
		return tr.checkMembers(segments, text)
	case len(segments) == 1 && !camel.MatchString(first):
		return "" // a plain word: not a name this can tell from prose
	}
	for _, s := range segments {
		if !tr.names[s] && namedElsewhere[s] == "" {
			return fmt.Sprintf("%s: nothing in the code, the CRD or the alerts is named %s", text, s)
		}
	}
	return ""
}

// inPackage says whether package pkg declares name, or one of its types
// has a field or method of that name.
func (tr *truth) inPackage(pkg, name string) bool {
	for declared := range tr.packages[pkg] {
		if declared == name || tr.members[declared][name] {
			return true
		}
	}
	return false
}

// checkField checks a field path of LBRegistrar, or of a kind the docs
// describe beside it.
func (tr *truth) checkField(text string) string {
	if tr.literals[text] {
		return ""
	}
	path := strings.Split(strings.ReplaceAll(text, "()", ""), ".")
	for _, schema := range tr.crd {
		if hasPath(schema, schema, path) {
			return ""
		}
	}
	for _, kind := range worldKinds {
		if kindHasPath(reflect.TypeOf(kind), path) {
			return ""
		}
	}
	return fmt.Sprintf("field %s: neither LBRegistrar nor a Kubernetes kind the docs describe has it", text)
}

// checkMembers checks Type.Member[.Member...] as far as the types are
// known.
func (tr *truth) checkMembers(segments []string, text string) string {
	if len(segments) < 2 || tr.members[segments[0]] == nil {
		return ""
	}
	if !tr.members[segments[0]][segments[1]] {
		return fmt.Sprintf("%s: %s has no field or method %s", text, segments[0], segments[1])
	}
	return ""
}

// The check finds each kind of dead name, and passes their live twins.
func TestDocTruthFindsDeadNames(t *testing.T) {
	truth := loadTruth(t)
	for _, tc := range []struct{ doc, want string }{
		{"`Lanes.Acquire` parks", "Lanes.Acquire: Lanes has no field or method Acquire"},
		{"```\n  ├─ lanes.Acquire   the lane\n```\n", "lanes.Acquire: package lanes declares no Acquire"},
		{"serve's `--no-such-flag`", "flag --no-such-flag: no command of lbregistrar has it"},
		{"```sh\nlbregistrar plan --dry-run\n```\n", "flag --dry-run: lbregistrar plan has no such flag"},
		{"`lbregistrar validate --keyless`", "flag --keyless: lbregistrar validate has no such flag"},
		{"```yaml\nargs:\n- --webhook-port=:9443\n```\n", "flag --webhook-port: no command of lbregistrar has it"},
		{"alert on lbregistrar_writes_total", "metric lbregistrar_writes_total is not registered"},
		{"`SecretNamespaceForbidden`", "SecretNamespaceForbidden: nothing in the code, the CRD or the alerts is named SecretNamespaceForbidden"},
		{"`spec.services[].nodeport`", "field spec.services[].nodeport: neither LBRegistrar nor a Kubernetes kind the docs describe has it"},
		{"`status.Writers.Nope`", "status.Writers.Nope: Writers has no field or method Nope"},
		{"`serviceMonitor.enable`", "chart value serviceMonitor.enable: the values schema has no such key"},
	} {
		if got := truth.check(tc.doc); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%q: %q, want %q", tc.doc, got, tc.want)
		}
	}
	live := "`lbregistrar plan --keyless`, `--drain-period`, `spec.services[].targetType`, `status.backendSets`, `IdentityUnsupported`, " +
		"lbregistrar_pending_writes, workqueue_depth, `status.Writers.Open`, `serviceMonitor.enabled`, `spec.providerID`, `TestDocsNameWhatExists`\n" +
		"```sh\nlbregistrar plan --kubeconfig ~/.kube/config --detailed-exitcode | tee plan.txt\n```\n"
	if got := truth.check(live); len(got) > 0 {
		t.Errorf("live names found dead: %q", got)
	}
}
