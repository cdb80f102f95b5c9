package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/didnmf/didnmf/internal/cli"
)

// The ports every recipe gives serve (the Dockerfile EXPOSEs them, the Service lists them).
const (
	gossipPort = 7946
	actorPort  = 7947
	dataPort   = 7948
	httpPort   = 8265
)

// addedByIssue33 are serve's HTTP flags, which issue 33 adds (serve --http and its
// credentials). The recipes pass them already; until serve has them, the test says so (a
// skipped subtest) and checks the other flags; once serve has any of them, all four must
// exist and are checked as every other flag.
var addedByIssue33 = []string{"http", "http-token-file", "http-cert", "http-key"}

// serveArgs is what a recipe passes to `didnmf serve`: each flag's values by name, in order.
type serveArgs map[string][]string

// one returns the flag's value, failing unless it is given exactly once.
func (a serveArgs) one(t *testing.T, where, name string) string {
	t.Helper()
	if len(a[name]) != 1 {
		t.Fatalf("%s: --%s given %d times (%q), want once", where, name, len(a[name]), a[name])
	}
	return a[name][0]
}

// parseServe parses serve's flags from args (after "serve"): --name=value or --name value;
// every flag must be one of serve's (or, until serve has them, of addedByIssue33).
func parseServe(t *testing.T, where string, args []string) serveArgs {
	t.Helper()
	known, err := cli.CommandFlags("serve")
	if err != nil {
		t.Fatal(err)
	}
	var has []string
	for _, f := range addedByIssue33 {
		if slices.Contains(known, f) {
			has = append(has, f)
		}
	}
	if len(has) > 0 && len(has) != len(addedByIssue33) {
		t.Errorf("serve has %v of issue 33's HTTP flags %v, not all", has, addedByIssue33)
	}
	t.Run("issue33-http-flags", func(t *testing.T) {
		if len(has) == 0 {
			t.Skipf("serve has none of %v yet (issue 33 adds them): %s's are checked once they exist", addedByIssue33, where)
		}
	})
	out := serveArgs{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q of serve is not a flag", where, a)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			if i+1 == len(args) {
				t.Errorf("%s: --%s has no value", where, name)
				continue
			}
			i++
			value = args[i]
		}
		if !slices.Contains(known, name) && (len(has) > 0 || !slices.Contains(addedByIssue33, name)) {
			t.Errorf("%s passes --%s, which didnmf serve does not take (its flags: %v)", where, name, known)
		}
		out[name] = append(out[name], value)
	}
	return out
}

// portOf returns the port of host:port (the host may be a placeholder such as $(POD_IP)).
func portOf(t *testing.T, where, hostPort string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatalf("%s: %q is not host:port: %v", where, hostPort, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %q: port %q", where, hostPort, port)
	}
	return host, p
}

// checkPorts checks that serve's addresses use the recipes' ports.
func checkPorts(t *testing.T, where string, a serveArgs) {
	t.Helper()
	if _, p := portOf(t, where+" --bind", a.one(t, where, "bind")); p != gossipPort {
		t.Errorf("%s: --bind port %d, want the gossip port %d", where, p, gossipPort)
	}
	for _, c := range []struct {
		flag string
		want int
	}{{"actor-port", actorPort}, {"data-port", dataPort}} {
		if v := a.one(t, where, c.flag); v != strconv.Itoa(c.want) {
			t.Errorf("%s: --%s %s, want %d", where, c.flag, v, c.want)
		}
	}
	if _, p := portOf(t, where+" --http", a.one(t, where, "http")); p != httpPort {
		t.Errorf("%s: --http port %d, want %d", where, p, httpPort)
	}
}

// bytesOf parses a size as serve's --memory (8GiB, 512MiB) or a Kubernetes quantity (8Gi).
func bytesOf(t *testing.T, s string) int64 {
	t.Helper()
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("size %q: %v", s, err)
			}
			return v * u.scale
		}
	}
	t.Fatalf("size %q: want a number with Ki/Mi/Gi/Ti(B)", s)
	return 0
}

// --- Kubernetes ---

type objectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type service struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
			Protocol   string `yaml:"protocol"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	ReadinessProbe  *probe        `yaml:"readinessProbe"`
	LivenessProbe   *probe        `yaml:"livenessProbe"`
	VolumeMounts    []volumeMount `yaml:"volumeMounts"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

// mountOf returns the mount of the volume whose mount path holds file p.
func (c container) mountOf(p string) (volumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return m, true
		}
	}
	return volumeMount{}, false
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode int    `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct {
		Medium string `yaml:"medium"`
	} `yaml:"emptyDir"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
}

type statefulSet struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		ServiceName string `yaml:"serviceName"`
		Replicas    int    `yaml:"replicas"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
					FSGroup      int  `yaml:"fsGroup"`
				} `yaml:"securityContext"`
				InitContainers []container `yaml:"initContainers"`
				Containers     []container `yaml:"containers"`
				Volumes        []volume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata objectMeta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

// readManifest decodes the documents of a multi-document YAML file by kind.
func readManifest(t *testing.T, file string) map[string][]yaml.Node {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]yaml.Node{}
	dec := yaml.NewDecoder(f)
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var head struct {
			APIVersion string     `yaml:"apiVersion"`
			Kind       string     `yaml:"kind"`
			Metadata   objectMeta `yaml:"metadata"`
		}
		if err := doc.Decode(&head); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" {
			t.Errorf("%s: a document without apiVersion, kind or metadata.name: %+v", file, head)
		}
		out[head.Kind] = append(out[head.Kind], doc)
	}
	return out
}

func decodeOne[T any](t *testing.T, docs map[string][]yaml.Node, kind string) T {
	t.Helper()
	var v T
	if len(docs[kind]) != 1 {
		t.Fatalf("want one %s, have %d", kind, len(docs[kind]))
	}
	if err := docs[kind][0].Decode(&v); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return v
}

// TestKubernetes: the manifest's StatefulSet runs `didnmf serve` with flags serve takes, on
// the ports its headless Service and containers name; the Service publishes pods before they
// are ready and is the StatefulSet's; members join the first pod and the Service by DNS name;
// the probes are /readyz and /healthz on the HTTP port; the secrets come read-only from
// Secrets, and reach the flags' files; the memory request and limit are a bit above --memory.
func TestKubernetes(t *testing.T) {
	const file = "kubernetes/didnmf.yaml"
	docs := readManifest(t, file)
	svc := decodeOne[service](t, docs, "Service")
	sts := decodeOne[statefulSet](t, docs, "StatefulSet")
	pod := sts.Spec.Template.Spec

	// The headless Service is the StatefulSet's, and selects its pods.
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want a headless Service that publishes pods before they are ready",
			svc.Metadata.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if sts.Spec.ServiceName != svc.Metadata.Name {
		t.Errorf("StatefulSet serviceName %q, want the headless Service %q", sts.Spec.ServiceName, svc.Metadata.Name)
	}
	for k, v := range svc.Spec.Selector {
		if sts.Spec.Template.Metadata.Labels[k] != v || sts.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("the Service selects %s=%s, which the StatefulSet's pods (or selector) do not carry", k, v)
		}
	}
	if len(svc.Spec.Selector) == 0 || sts.Spec.Replicas < 1 {
		t.Errorf("Service selector %v, replicas %d", svc.Spec.Selector, sts.Spec.Replicas)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{"didnmf"}) || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("container %s runs %q %q, want didnmf serve", c.Name, c.Command, c.Args)
	}
	args := parseServe(t, file, c.Args[1:])
	checkPorts(t, file, args)

	// Ports: the containers' and the Service's, by name, equal the flags'.
	wantPorts := map[string]struct {
		port     int
		protocol string
	}{"gossip": {gossipPort, "TCP"}, "gossip-udp": {gossipPort, "UDP"}, "actor": {actorPort, "TCP"}, "data": {dataPort, "TCP"}, "http": {httpPort, "TCP"}}
	got := map[string]string{}
	for _, p := range c.Ports {
		got[p.Name] = fmt.Sprint(p.ContainerPort, "/", p.Protocol)
	}
	for name, w := range wantPorts {
		if got[name] != fmt.Sprint(w.port, "/", w.protocol) {
			t.Errorf("container port %s is %q, want %d/%s", name, got[name], w.port, w.protocol)
		}
	}
	if len(c.Ports) != len(wantPorts) {
		t.Errorf("container ports %v, want %v", got, wantPorts)
	}
	if len(svc.Spec.Ports) != len(wantPorts) {
		t.Errorf("Service ports %+v, want %v", svc.Spec.Ports, wantPorts)
	}
	for _, p := range svc.Spec.Ports {
		w, ok := wantPorts[p.Name]
		if !ok || p.Port != w.port || p.Protocol != w.protocol || p.TargetPort != p.Name {
			t.Errorf("Service port %+v, want %s %d/%s targeting the container's port %s", p, p.Name, w.port, w.protocol, p.Name)
		}
	}

	// The node's name and addresses are the pod's.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	if args.one(t, file, "name") != "$(POD_NAME)" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("--name %q (POD_NAME from %q), want the pod's name", args["name"], env["POD_NAME"])
	}
	for _, f := range []string{"bind", "http"} {
		if host, _ := portOf(t, f, args.one(t, file, f)); host != "$(POD_IP)" || env["POD_IP"] != "status.podIP" {
			t.Errorf("--%s on %q (POD_IP from %q), want the pod's IP", f, host, env["POD_IP"])
		}
	}

	// Joining: pod 0 (itself, for pod 0) and the Service's name (every pod), on the gossip port.
	first := fmt.Sprintf("%s-0.%s", sts.Metadata.Name, svc.Metadata.Name)
	var joins []string
	for _, j := range strings.Split(args.one(t, file, "join"), ",") {
		host, p := portOf(t, "--join", j)
		if p != gossipPort {
			t.Errorf("--join %s: port %d, want the gossip port %d", j, p, gossipPort)
		}
		joins = append(joins, host)
	}
	if !slices.Contains(joins, first) || !slices.Contains(joins, svc.Metadata.Name) {
		t.Errorf("--join %v, want %s (the first pod) and %s (the headless Service: every pod)", joins, first, svc.Metadata.Name)
	}

	// Probes: open routes on the HTTP port, HTTPS as --http off loopback is.
	for _, p := range []struct {
		what  string
		probe *probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != "http" || p.probe.HTTPGet.Scheme != "HTTPS" {
			t.Errorf("%s probe %+v, want HTTPS GET %s on port http", p.what, p.probe, p.path)
		}
	}

	// Secrets: mounted read-only from Secrets into the init container, which installs each
	// file the flags name, mode 0600 (a certificate may be 0644), into a memory-backed
	// directory the server mounts read-only.
	volumes := map[string]volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, ctr := range append(slices.Clone(pod.InitContainers), c) {
		if ctr.Image != c.Image {
			t.Errorf("container %s runs image %s, want the server's %s", ctr.Name, ctr.Image, c.Image)
		}
		if ctr.SecurityContext.AllowPrivilegeEscalation == nil || *ctr.SecurityContext.AllowPrivilegeEscalation || !ctr.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("container %s: want allowPrivilegeEscalation false and a read-only root file system", ctr.Name)
		}
		for _, m := range ctr.VolumeMounts {
			if v := volumes[m.Name]; v.Secret != nil && !m.ReadOnly {
				t.Errorf("container %s mounts Secret %s at %s writable, want readOnly", ctr.Name, v.Secret.SecretName, m.MountPath)
			}
		}
	}
	if len(pod.InitContainers) != 1 {
		t.Fatalf("want one init container (the secrets' copy), have %d", len(pod.InitContainers))
	}
	initC := pod.InitContainers[0]
	script := strings.Join(initC.Command, "\n")
	install := regexp.MustCompile(`(?m)^\s*install -m (0[0-7]{3}) (\S+) (\S+)\s*$`)
	installed := map[string][2]string{} // destination -> mode, source
	for _, m := range install.FindAllStringSubmatch(script, -1) {
		installed[m[3]] = [2]string{m[1], m[2]}
	}
	for _, f := range []string{"secret-file", "http-token-file", "http-cert", "http-key"} {
		p := args.one(t, file, f)
		mount, ok := c.mountOf(p)
		if v := volumes[mount.Name]; !ok || !mount.ReadOnly || v.EmptyDir == nil || v.EmptyDir.Medium != "Memory" {
			t.Errorf("--%s %s: not on a read-only mount of a memory-backed emptyDir (%+v)", f, p, mount)
			continue
		}
		inst, ok := installed[p]
		if !ok {
			t.Errorf("--%s %s: the init container installs no such file:\n%s", f, p, script)
			continue
		}
		if want := "0600"; f != "http-cert" && inst[0] != want {
			t.Errorf("--%s %s: installed mode %s, want %s", f, p, inst[0], want)
		}
		if initMount, ok := initC.mountOf(p); !ok || initMount.Name != mount.Name || initMount.ReadOnly {
			t.Errorf("--%s %s: the init container does not write it into volume %s", f, p, mount.Name)
		}
		src, ok := initC.mountOf(inst[1])
		v := volumes[src.Name]
		if !ok || v.Secret == nil || !src.ReadOnly {
			t.Errorf("--%s: installed from %s, which is not on a read-only Secret mount", f, inst[1])
			continue
		}
		item := strings.TrimPrefix(inst[1], strings.TrimSuffix(src.MountPath, "/")+"/")
		if !slices.ContainsFunc(v.Secret.Items, func(it struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		}) bool {
			return it.Path == item
		}) {
			t.Errorf("--%s: %s is not an item of Secret %s (%+v)", f, item, v.Secret.SecretName, v.Secret.Items)
		}
		if v.Secret.DefaultMode&0o007 != 0 {
			t.Errorf("Secret volume %s: mode %04o lets others read it", src.Name, v.Secret.DefaultMode)
		}
	}
	if sc := pod.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser == 0 || sc.FSGroup == 0 {
		t.Errorf("pod securityContext %+v, want a non-root user and an fsGroup (to read the Secrets' files, mode 0440)", sc)
	}

	// The node's directory is on its own volume claim; the data root is the shared claim.
	dataDir := args.one(t, file, "data-dir")
	if m, ok := c.mountOf(dataDir); !ok || !slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(v struct {
		Metadata objectMeta `yaml:"metadata"`
	}) bool {
		return v.Metadata.Name == m.Name
	}) {
		t.Errorf("--data-dir %s is not inside a volume of the StatefulSet's volumeClaimTemplates", dataDir)
	}
	for _, root := range args["data-root"] {
		i := slices.IndexFunc(c.VolumeMounts, func(m volumeMount) bool { return m.MountPath == root })
		if i < 0 || volumes[c.VolumeMounts[i].Name].PersistentVolumeClaim == nil {
			t.Errorf("--data-root %s is not the mount of a persistent volume claim", root)
		}
	}

	// Sizing: requests equal limits (guaranteed), the memory a bit above --memory (at least a
	// tenth and 512 MiB more, at most half more and 4 GiB), the CPUs --threads.
	mem := bytesOf(t, args.one(t, file, "memory"))
	for _, rs := range []map[string]string{c.Resources.Requests, c.Resources.Limits} {
		m := bytesOf(t, rs["memory"])
		if m < mem+max(mem/10, 512<<20) || m > mem+min(mem/2, 4<<30) {
			t.Errorf("container memory %s for --memory %s: want a bit above it", rs["memory"], args["memory"])
		}
		if rs["cpu"] != args.one(t, file, "threads") {
			t.Errorf("container cpu %q, want --threads %s", rs["cpu"], args["threads"])
		}
	}
	if c.Resources.Requests["memory"] != c.Resources.Limits["memory"] {
		t.Errorf("memory request %s, limit %s: want them equal", c.Resources.Requests["memory"], c.Resources.Limits["memory"])
	}
}

// --- Docker ---

// instruction is one of a Dockerfile's (continuation lines joined, comments dropped).
type instruction struct{ cmd, args string }

func readDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestDockerfile: a build stage from golang (the go.mod's Go) makes a static binary of
// ./cmd/didnmf; the final stage copies it, runs as a non-root user, keeps the data directory
// and the data root as volumes, EXPOSEs the recipes' ports and enters through the entry point
// script (TestEntrypoint).
func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t, "../Dockerfile")
	var stages [][]instruction
	args := map[string]string{}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			stages = append(stages, []instruction{in})
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case len(stages) > 0:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, have %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	from := strings.Fields(build[0].args)
	if len(from) != 3 || !strings.HasPrefix(from[0], "golang:") || !strings.EqualFold(from[1], "AS") {
		t.Fatalf("build stage FROM %q, want golang:... AS NAME", build[0].args)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil || !strings.Contains(from[0], "${GO_VERSION}") || args["GO_VERSION"] != string(goLine[1]) {
		t.Errorf("build stage FROM %s with GO_VERSION %q, want go.mod's Go %s", from[0], args["GO_VERSION"], goLine[1])
	}
	if !slices.ContainsFunc(build, func(in instruction) bool {
		return in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0 go build -trimpath") && strings.Contains(in.args, "./cmd/didnmf")
	}) {
		t.Errorf("the build stage does not run CGO_ENABLED=0 go build -trimpath ... ./cmd/didnmf")
	}
	find := func(cmd string) []string {
		var out []string
		for _, in := range final {
			if in.cmd == cmd {
				out = append(out, in.args)
			}
		}
		return out
	}
	if copies := find("COPY"); !slices.ContainsFunc(copies, func(a string) bool {
		return strings.HasPrefix(a, "--from="+from[2]+" ") && strings.HasSuffix(a, " /usr/local/bin/didnmf")
	}) || !slices.Contains(copies, "deploy/docker/entrypoint.sh /usr/local/bin/didnmf-entrypoint") {
		t.Errorf("the final stage's COPYs %q: want the binary from %s as /usr/local/bin/didnmf and the entry point", copies, from[2])
	}
	users := find("USER")
	if len(users) != 1 {
		t.Fatalf("final stage USER %q, want one", users)
	}
	uid, _, _ := strings.Cut(users[0], ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s: want a numeric non-root user (Kubernetes' runAsNonRoot checks the number)", users[0])
	}
	if runs := strings.Join(find("RUN"), "\n"); !strings.Contains(runs, "--uid "+uid+" ") {
		t.Errorf("the final stage makes no user of uid %s", uid)
	}
	if v := find("VOLUME"); len(v) != 1 || v[0] != `["/var/lib/didnmf", "/data"]` {
		t.Errorf("VOLUME %q, want the data directory and the data root", v)
	}
	var exposed []string
	for _, e := range find("EXPOSE") {
		exposed = append(exposed, strings.Fields(e)...)
	}
	want := []string{fmt.Sprint(gossipPort, "/tcp"), fmt.Sprint(gossipPort, "/udp"), fmt.Sprint(actorPort, "/tcp"), fmt.Sprint(dataPort, "/tcp"), fmt.Sprint(httpPort, "/tcp")}
	if slices.Sort(exposed); !slices.Equal(exposed, slices.Sorted(slices.Values(want))) {
		t.Errorf("EXPOSE %v, want %v", exposed, want)
	}
	if e := find("ENTRYPOINT"); len(e) != 1 || e[0] != `["/usr/local/bin/didnmf-entrypoint"]` {
		t.Errorf("ENTRYPOINT %q, want the entry point script", e)
	}
	if _, err := exec.LookPath("docker"); err == nil {
		t.Log("docker is installed; this test does not build the image (it needs a daemon and the network)")
	}
}

// runEntrypoint runs the image's entry point script with a stand-in didnmf that records its
// arguments, and returns them.
func runEntrypoint(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	stub := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + out + "\n"
	if err := os.WriteFile(filepath.Join(dir, "didnmf"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", append([]string{"docker/entrypoint.sh"}, args...)...)
	cmd.Env = append([]string{"PATH=" + dir + ":/usr/bin:/bin"}, env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("entrypoint %q: %v\n%s", args, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestEntrypoint: the image's entry point runs serve on the container's address with flags
// serve takes and the EXPOSEd ports, its data directory inside the VOLUME and the data root
// the other; flags given to the container come last (they override); any other command, or
// --version, runs as given.
func TestEntrypoint(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	got := runEntrypoint(t, []string{"DIDNMF_IP=10.1.2.3"}, "--join", "10.1.2.4:7946", "--memory=2GiB")
	if len(got) < 2 || got[0] != "serve" {
		t.Fatalf("entrypoint runs didnmf %q, want serve", got)
	}
	args := parseServe(t, "docker/entrypoint.sh", got[1:])
	checkPorts(t, "docker/entrypoint.sh", args)
	if b := args.one(t, "entrypoint", "bind"); b != "10.1.2.3:7946" {
		t.Errorf("--bind %s, want DIDNMF_IP's", b)
	}
	if !slices.Equal(got[len(got)-3:], []string{"--join", "10.1.2.4:7946", "--memory=2GiB"}) {
		t.Errorf("the container's flags are not last: %q", got)
	}
	if d := args.one(t, "entrypoint", "data-dir"); path.Dir(d) != "/var/lib/didnmf" {
		t.Errorf("--data-dir %s, want a directory inside the volume /var/lib/didnmf", d)
	}
	if r := args.one(t, "entrypoint", "data-root"); r != "/data" {
		t.Errorf("--data-root %s, want the volume /data", r)
	}
	if s := args.one(t, "entrypoint", "secret-file"); path.Dir(s) != "/var/lib/didnmf" {
		t.Errorf("--secret-file %s, want it in the volume /var/lib/didnmf (the first node makes it)", s)
	}
	if got := runEntrypoint(t, []string{"DIDNMF_IP=fd00::5"}); !slices.Contains(got, "[fd00::5]:7946") || !slices.Contains(got, "[fd00::5]:8265") {
		t.Errorf("an IPv6 address: %q, want it bracketed", got)
	}
	for _, args := range [][]string{{"--version"}, {"status", "--cluster", "10.0.0.1:7946"}, {"jobs", "--all"}} {
		if got := runEntrypoint(t, nil, args...); !slices.Equal(got, args) {
			t.Errorf("entrypoint %q runs didnmf %q, want it as given", args, got)
		}
	}
}

// --- systemd ---

// readUnit returns a unit file's settings by key, in order (continuation lines joined).
func readUnit(t *testing.T, file string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[")) {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		k, v, ok := strings.Cut(cur.String(), "=")
		if !ok {
			t.Errorf("%s: %q is not KEY=VALUE", file, cur.String())
		}
		out[k] = append(out[k], v)
		cur.Reset()
	}
	return out
}

// TestSystemdUnit: the unit runs `didnmf serve` with flags serve takes, the recipes' ports,
// its data directory in its StateDirectory and its data root among the paths it may write;
// every ${VAR} it uses is set in the example environment file; it is hardened (a user of its
// own, ProtectSystem=strict, NoNewPrivileges, ...); `systemd-analyze verify` finds nothing
// wrong, and `systemd-analyze security` rates its exposure at most 2.0, where installed.
func TestSystemdUnit(t *testing.T) {
	const file = "systemd/didnmf.service"
	u := readUnit(t, file)
	if len(u["ExecStart"]) != 1 {
		t.Fatalf("ExecStart %q, want one", u["ExecStart"])
	}
	exec0 := u["ExecStart"][0]
	if strings.ContainsAny(exec0, `"'`) {
		t.Errorf("ExecStart uses quotes; this test splits it on spaces: %s", exec0)
	}
	words := strings.Fields(exec0)
	if len(words) < 2 || words[0] != "/usr/local/bin/didnmf" || words[1] != "serve" {
		t.Fatalf("ExecStart %q, want /usr/local/bin/didnmf serve ...", words)
	}
	// The example's values stand for the ${VAR}s, and must all be there.
	envFile := readUnit(t, "systemd/didnmf.env.example")
	vars := regexp.MustCompile(`\$\{([A-Z_]+)\}`)
	var expanded []string
	for _, w := range words[2:] {
		expanded = append(expanded, vars.ReplaceAllStringFunc(w, func(v string) string {
			name := vars.FindStringSubmatch(v)[1]
			if len(envFile[name]) != 1 {
				t.Errorf("ExecStart uses ${%s}, which didnmf.env.example does not set (once)", name)
				return ""
			}
			return envFile[name][0]
		}))
	}
	if got := u["EnvironmentFile"]; !slices.Equal(got, []string{"/etc/didnmf/didnmf.env"}) {
		t.Errorf("EnvironmentFile %q", got)
	}
	args := parseServe(t, file, expanded)
	checkPorts(t, file, args)
	for _, kv := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
		"StateDirectory=didnmf", "StateDirectoryMode=0700", "RestrictSUIDSGID=yes", "CapabilityBoundingSet=", "UMask=0077"} {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(u[k], v) {
			t.Errorf("%s: want %s (have %q)", file, kv, u[k])
		}
	}
	user := u["User"]
	if len(user) != 1 || user[0] == "root" || user[0] == "" {
		t.Errorf("User %q, want a user of its own", user)
	} else if b, err := os.ReadFile("systemd/didnmf.sysusers"); err != nil || !regexp.MustCompile(`(?m)^u `+user[0]+` `).Match(b) {
		t.Errorf("didnmf.sysusers does not make user %s: %v", user[0], err)
	}
	if d := args.one(t, file, "data-dir"); !strings.HasPrefix(d, "/var/lib/"+u["StateDirectory"][0]+"/") {
		t.Errorf("--data-dir %s is not inside the StateDirectory /var/lib/%s", d, u["StateDirectory"][0])
	}
	for _, r := range args["data-root"] {
		if !slices.Contains(u["ReadWritePaths"], r) && !slices.Contains(u["ReadWritePaths"], "-"+r) {
			t.Errorf("--data-root %s is not among ReadWritePaths %q: under ProtectSystem=strict the node could not write --out-shared there", r, u["ReadWritePaths"])
		}
	}
	if s := args.one(t, file, "secret-file"); !strings.HasPrefix(s, "/etc/didnmf/") {
		t.Errorf("--secret-file %s, want it under /etc/didnmf", s)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): the unit is not verified")
	}
	// verify checks that the binary exists: the copy names this test's executable instead.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "didnmf.service")
	if err := os.WriteFile(copyPath, bytes.ReplaceAll(unit, []byte("/usr/local/bin/didnmf"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("didnmf.service")) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", copyPath).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && bytes.Contains(out, []byte("Overall exposure level")):
		t.Errorf("systemd-analyze security: exposure above 2.0:\n%s", out)
	case err != nil:
		t.Logf("systemd-analyze security --offline is not supported here (systemd < 250?): %v", err)
	default:
		t.Logf("systemd-analyze security: %s", bytes.TrimSpace(out[bytes.LastIndex(out, []byte("\n→"))+1:]))
	}
}
