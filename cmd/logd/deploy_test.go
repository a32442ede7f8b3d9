package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/logd-dev/logd/internal/e2e"
)

// deployDir holds the packaging files the tests below check.
const deployDir = "../../deploy"

// dockerInstr is one instruction of a Dockerfile, continuation lines
// joined.
type dockerInstr struct {
	cmd  string // upper case
	args string
}

// parseDockerfile splits a Dockerfile into instructions.
func parseDockerfile(t *testing.T, path string) []dockerInstr {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dockerInstr
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
		if cont {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, dockerInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// execForm decodes an exec-form argument list (["a", "b"]).
func execForm(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("want an exec-form list, got %s: %v", s, err)
	}
	return out
}

// checkCommand checks that args (after the binary) are a command line of
// logd: a known command whose flags parse. For run, with env under it,
// the whole configuration must resolve, and it is returned.
func checkCommand(t *testing.T, args []string, env map[string]string) *config {
	t.Helper()
	root := newRootCmd(func(k string) string { return env[k] }, io.Discard, io.Discard, nil)
	args = defaultToRun(root, args)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("%v: no logd command: %v", args, err)
	}
	if cmd.Name() == "run" {
		c, err := parseFlags(rest, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatalf("logd %s: %v", strings.Join(args, " "), err)
		}
		return &c
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("logd %s: %v", strings.Join(args, " "), err)
	}
	return nil
}

// dockerImage is what the tests need of deploy/Dockerfile's final stage.
type dockerImage struct {
	env    map[string]string
	expose []string
	volume string
}

// TestDockerfile: a multi-stage, static build; the final stage runs as
// a non-root user; its variables are logd's, its EXPOSE the ports they
// set, its VOLUME the data directory; the health check and the default
// command are logd command lines that parse.
func TestDockerfile(t *testing.T) {
	checkDockerfile(t)
}

func checkDockerfile(t *testing.T) dockerImage {
	t.Helper()
	instrs := parseDockerfile(t, filepath.Join(deployDir, "Dockerfile"))
	var froms []int
	for i, in := range instrs {
		if in.cmd == "FROM" {
			froms = append(froms, i)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage build, got %d FROM", len(froms))
	}
	var static bool
	for _, in := range instrs[:froms[len(froms)-1]] {
		if in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0 go build") && strings.Contains(in.args, "./cmd/logd") {
			static = true
		}
	}
	if !static {
		t.Error("no CGO_ENABLED=0 go build of ./cmd/logd in the build stage")
	}
	img := dockerImage{env: map[string]string{}}
	var user string
	var entry, cmd, health []string
	for _, in := range instrs[froms[len(froms)-1]:] {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("ENV %s: want KEY=VALUE", in.args)
				}
				img.env[k] = v
			}
		case "EXPOSE":
			img.expose = append(img.expose, strings.Fields(in.args)...)
		case "VOLUME":
			img.volume = in.args
		case "ENTRYPOINT":
			entry = execForm(t, in.args)
		case "CMD":
			cmd = execForm(t, in.args)
		case "HEALTHCHECK":
			_, c, ok := strings.Cut(in.args, "CMD ")
			if !ok {
				t.Fatalf("HEALTHCHECK %s: no CMD", in.args)
			}
			health = execForm(t, c)
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("USER %q: want a non-root user", user)
	}
	for k := range img.env {
		if !strings.HasPrefix(k, "LOGD_") {
			continue
		}
		if name := flagOfEnv(k); name == "" {
			t.Errorf("ENV %s is no flag's variable", k)
		}
	}
	// The default command line, with the image's variables, resolves.
	if len(entry) != 1 || entry[0] != "/usr/local/bin/logd" {
		t.Fatalf("ENTRYPOINT %v: want /usr/local/bin/logd", entry)
	}
	env := map[string]string{"LOGD_INSECURE_ALLOW_PLAINTEXT": "true"} // what a user must add, or TLS
	for k, v := range img.env {
		env[k] = v
	}
	c := checkCommand(t, cmd, env)
	if c == nil {
		t.Fatalf("CMD %v: want logd run", cmd)
	}
	if img.volume != c.dataDir {
		t.Errorf("VOLUME %s, but the data directory is %s", img.volume, c.dataDir)
	}
	for _, addr := range []string{c.listen, c.raftAddr, c.kafka.listen} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil || !slices.Contains(img.expose, port) {
			t.Errorf("EXPOSE %v lacks %s's port", img.expose, addr)
		}
	}
	if len(health) < 2 || health[0] != entry[0] || health[1] != "health" {
		t.Fatalf("HEALTHCHECK %v: want logd health", health)
	}
	checkCommand(t, health[1:], env)
	return img
}

// flagOfEnv returns the flag whose variable is name, or "".
func flagOfEnv(name string) string {
	fs := pflag.NewFlagSet("logd", pflag.ContinueOnError)
	defineFlags(fs)
	var found string
	fs.VisitAll(func(f *pflag.Flag) {
		if envName(f.Name) == name {
			found = f.Name
		}
	})
	return found
}

// composeFile is what the tests need of deploy/compose.yaml.
type composeFile struct {
	Services map[string]struct {
		Build       *struct{ Context, Dockerfile string } `yaml:"build"`
		Image       string                                `yaml:"image"`
		Command     []string                              `yaml:"command"`
		Ports       []string                              `yaml:"ports"`
		Volumes     []string                              `yaml:"volumes"`
		Environment map[string]string                     `yaml:"environment"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestComposeFile: each logd service's command line resolves with the
// image's variables; its published ports and volume are the ones it
// listens on and stores in; its advertised addresses are its own
// service's; the joining nodes join a node of the file; Prometheus
// scrapes every node; every mounted file of the repository exists.
func TestComposeFile(t *testing.T) {
	img := checkDockerfile(t)
	data, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatal(err)
	}
	var image string
	nodes := map[string]*config{}
	for name, s := range cf.Services {
		if s.Build != nil {
			if s.Build.Dockerfile != "deploy/Dockerfile" || s.Build.Context != ".." {
				t.Errorf("%s: build %+v, want deploy/Dockerfile from the repository's root", name, *s.Build)
			}
			image = s.Image
		}
	}
	if image == "" {
		t.Fatal("no service builds deploy/Dockerfile")
	}
	ids := map[string]bool{}
	for name, s := range cf.Services {
		if s.Image != image {
			continue
		}
		env := map[string]string{}
		for k, v := range img.env {
			env[k] = v
		}
		for k, v := range s.Environment {
			env[k] = v
		}
		c := checkCommand(t, s.Command, env)
		if c == nil {
			t.Fatalf("%s: command %v is not logd run", name, s.Command)
		}
		nodes[name] = c
		if ids[c.nodeID] {
			t.Errorf("%s: node id %s taken", name, c.nodeID)
		}
		ids[c.nodeID] = true
		for _, a := range []struct{ flag, addr, listen string }{{"--advertise", c.advertise, c.listen}, {"--raft-advertise", c.raftAdvertise, c.raftAddr}} {
			host, port, err := net.SplitHostPort(a.addr)
			_, lport, _ := net.SplitHostPort(a.listen)
			if err != nil || host != name || port != lport {
				t.Errorf("%s: %s %q, want %s:%s", name, a.flag, a.addr, name, lport)
			}
		}
		published := map[string]bool{}
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			published[parts[len(parts)-1]] = true
		}
		for _, addr := range []string{c.listen, c.kafka.listen} {
			if _, port, _ := net.SplitHostPort(addr); !published[port] {
				t.Errorf("%s: ports %v do not publish %s", name, s.Ports, addr)
			}
		}
		var mounted bool
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if dst == c.dataDir {
				mounted = true
				if _, ok := cf.Volumes[src]; !ok {
					t.Errorf("%s: volume %s is not declared", name, src)
				}
			}
		}
		if !mounted {
			t.Errorf("%s: no volume at the data directory %s", name, c.dataDir)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("%d logd services, want 3", len(nodes))
	}
	var bootstrap int
	for name, c := range nodes {
		if c.join == "" {
			bootstrap++
			continue
		}
		host, _, _ := net.SplitHostPort(c.join)
		if target, ok := nodes[host]; !ok || target.advertise != c.join {
			t.Errorf("%s: --join %s is no node's advertised API", name, c.join)
		}
	}
	if bootstrap != 1 {
		t.Errorf("%d nodes bootstrap, want 1", bootstrap)
	}

	// Mounted files of the repository exist. deploy/grafana and
	// deploy/prometheus hold the dashboard and the alert rules, which
	// come with the metrics they show: a tree without either directory
	// yet has nothing to mount from it.
	for name, s := range cf.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				continue
			}
			top, _, _ := strings.Cut(strings.TrimPrefix(src, "./"), "/")
			if _, err := os.Stat(filepath.Join(deployDir, top)); err != nil && (top == "grafana" || top == "prometheus") {
				t.Logf("%s mounts %s: no deploy/%s yet", name, src, top)
				continue
			}
			if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
				t.Errorf("%s mounts %s: %v", name, src, err)
			}
		}
	}
	// Prometheus scrapes every node's API port.
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	pdata, err := os.ReadFile(filepath.Join(deployDir, "compose", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(pdata, &prom); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	// Its rule files are mounted into its container.
	mounts := map[string]bool{}
	for _, v := range cf.Services["prometheus"].Volumes {
		if _, dst, ok := strings.Cut(v, ":"); ok {
			dst, _, _ = strings.Cut(dst, ":")
			mounts[dst] = true
		}
	}
	if len(prom.RuleFiles) == 0 {
		t.Error("Prometheus evaluates no rule files")
	}
	for _, rf := range prom.RuleFiles {
		if !mounts[rf] {
			t.Errorf("Prometheus's rule file %s is not mounted (mounts %v)", rf, mounts)
		}
	}
	for name, c := range nodes {
		if !slices.Contains(targets, c.advertise) {
			t.Errorf("Prometheus does not scrape %s at %s (targets %v)", name, c.advertise, targets)
		}
	}
}

// TestSystemdUnit: systemd-analyze verify finds nothing to say about
// deploy/systemd/logd.service (with ExecStart's binary replaced by the
// built logd, since verify wants it to exist), the unit has the
// hardening options, and ExecStart with the example configuration file
// resolves.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(deployDir, "systemd", "logd.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart []string
	keys := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		keys[k] = v
		if k == "ExecStart" {
			execStart = strings.Fields(v)
		}
	}
	for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"DynamicUser": "yes", "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"} {
		if got, ok := keys[k]; !ok || got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	if len(execStart) < 2 || execStart[0] != "/usr/local/bin/logd" {
		t.Fatalf("ExecStart %v: want /usr/local/bin/logd", execStart)
	}
	// The example configuration stands in for /etc/logd/logd.yaml; its
	// certificate paths are only paths here.
	args := slices.Clone(execStart[1:])
	for i, a := range args {
		if a == "/etc/logd/logd.yaml" {
			args[i] = filepath.Join(deployDir, "systemd", "logd.yaml")
		}
	}
	c := checkCommand(t, args, nil)
	if c == nil || c.dataDir != "/var/lib/logd" || c.nodeID != "n1" || c.authn.mode != authRequired {
		t.Fatalf("ExecStart %v: %+v", execStart, c)
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("systemd-analyze: %v (scripts/test-tools.sh installs it)", err)
		}
		t.Skipf("systemd-analyze: %v (scripts/test-tools.sh installs it)", err)
	}
	tmp := filepath.Join(t.TempDir(), "logd.service")
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/logd", e2e.Logd())), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", tmp).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
