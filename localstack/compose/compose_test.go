// Package compose_test checks the LocalStack compose setup without Docker
// (the project's machines have none): the compose file is YAML with the
// services, settings and mounts the README describes, the mounts agree with
// the init hook, and the hook is an executable bash script that parses.
package compose_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const (
	composeFile = "docker-compose.yml"
	hookFile    = "init/ready.d/10-hpsearch.sh"
	hookDir     = "/etc/localstack/init/ready.d"
)

// composeSpec is the part of the compose schema the file uses; decoding
// refuses any other key, so a misspelt one (read_ony) fails the test.
type composeSpec struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []struct {
			Type     string `yaml:"type"`
			Source   string `yaml:"source"`
			Target   string `yaml:"target"`
			ReadOnly bool   `yaml:"read_only"`
			Bind     struct {
				CreateHostPath *bool `yaml:"create_host_path"`
			} `yaml:"bind"`
		} `yaml:"volumes"`
		Healthcheck struct {
			Test     []string `yaml:"test"`
			Interval string   `yaml:"interval"`
			Timeout  string   `yaml:"timeout"`
			Retries  int      `yaml:"retries"`
		} `yaml:"healthcheck"`
		Networks []string `yaml:"networks"`
	} `yaml:"services"`
	Networks map[string]struct {
		Name string `yaml:"name"`
	} `yaml:"networks"`
}

func loadCompose(t *testing.T) composeSpec {
	t.Helper()
	src, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c composeSpec
	if err := yaml.UnmarshalWithOptions(src, &c, yaml.DisallowUnknownField()); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return c
}

func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	ls, ok := c.Services["localstack"]
	if !ok {
		t.Fatalf("%s: no service localstack", composeFile)
	}
	if !strings.Contains(ls.Image, "localstack/localstack:") || strings.HasSuffix(ls.Image, ":latest}") {
		t.Errorf("%s: image %q: want a pinned localstack/localstack tag", composeFile, ls.Image)
	}
	if !slices.Contains(ls.Ports, "127.0.0.1:4566:4566") {
		t.Errorf("%s: ports %v: want 127.0.0.1:4566:4566 (the edge port, on loopback only)", composeFile, ls.Ports)
	}

	services := strings.Split(ls.Environment["SERVICES"], ",")
	for _, want := range []string{"s3", "sqs", "lambda", "iam", "sts", "logs"} {
		if !slices.Contains(services, want) {
			t.Errorf("%s: SERVICES=%q lacks %s", composeFile, ls.Environment["SERVICES"], want)
		}
	}
	if got := ls.Environment["LAMBDA_EXECUTOR"]; got != "docker" {
		t.Errorf("%s: LAMBDA_EXECUTOR=%q, want docker", composeFile, got)
	}

	// Function containers must join the network on which "localstack"
	// resolves, or the trainer cannot reach http://localstack:4566.
	net := ls.Environment["LAMBDA_DOCKER_NETWORK"]
	var netNames []string
	for key, n := range c.Networks {
		netNames = append(netNames, n.Name)
		if n.Name == net && !slices.Contains(ls.Networks, key) {
			t.Errorf("%s: service localstack is not on network %s (%s)", composeFile, key, net)
		}
	}
	if net == "" || !slices.Contains(netNames, net) {
		t.Errorf("%s: LAMBDA_DOCKER_NETWORK=%q is not a network the file names (%v)", composeFile, net, netNames)
	}

	mounts := map[string]string{} // target -> source
	for _, v := range ls.Volumes {
		if v.Type != "bind" {
			t.Errorf("%s: volume %s: type %q, want bind", composeFile, v.Target, v.Type)
		}
		mounts[v.Target] = v.Source
		if v.Target != "/var/run/docker.sock" && !v.ReadOnly {
			t.Errorf("%s: volume %s is writable; mount it read_only", composeFile, v.Target)
		}
		if strings.HasSuffix(v.Source, ".zip") && (v.Bind.CreateHostPath == nil || *v.Bind.CreateHostPath) {
			t.Errorf("%s: volume %s: set bind.create_host_path: false, or a missing zip becomes an empty directory", composeFile, v.Source)
		}
	}
	if mounts["/var/run/docker.sock"] != "/var/run/docker.sock" {
		t.Errorf("%s: the Docker socket is not mounted; LocalStack needs it to run functions", composeFile)
	}
	src, ok := mounts[hookDir]
	if !ok {
		t.Errorf("%s: nothing mounted at %s", composeFile, hookDir)
	} else if fi, err := os.Stat(src); err != nil || !fi.IsDir() || filepath.Clean(filepath.Join(src, filepath.Base(hookFile))) != filepath.Clean(hookFile) {
		t.Errorf("%s: %s is mounted from %q, want ./%s (which must exist)", composeFile, hookDir, src, filepath.Dir(hookFile))
	}

	// The zip goes where the hook looks for it, from dist/ at the
	// repository root.
	hookZip := hookDefaultZip(t)
	zipSrc, ok := mounts[hookZip]
	if !ok {
		t.Errorf("%s: nothing mounted at %s, where %s reads the trainer's zip", composeFile, hookZip, hookFile)
	} else if filepath.Clean(zipSrc) != filepath.Join("..", "..", "dist", "trainer-lambda-amd64.zip") {
		t.Errorf("%s: %s is mounted from %q, want ../../dist/trainer-lambda-amd64.zip", composeFile, hookZip, zipSrc)
	}

	if len(ls.Healthcheck.Test) == 0 {
		t.Errorf("%s: no healthcheck: `docker compose up --wait` would not wait for the init hook", composeFile)
	}
}

// hookDefaultZip returns the path the hook reads the zip from when
// HPSEARCH_TRAINER_ZIP is not set.
func hookDefaultZip(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(hookFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ZIP=\$\{HPSEARCH_TRAINER_ZIP:-([^}]+)\}$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no line ZIP=${HPSEARCH_TRAINER_ZIP:-PATH}", hookFile)
	}
	return string(m[1])
}

func TestInitHook(t *testing.T) {
	fi, err := os.Stat(hookFile)
	if err != nil {
		t.Fatal(err)
	}
	// LocalStack runs ready.d scripts that are executable.
	if fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s is not executable (mode %v): chmod +x it", hookFile, fi.Mode().Perm())
	}
	src, err := os.ReadFile(hookFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), "#!/usr/bin/env bash\n") {
		t.Errorf("%s: want a #!/usr/bin/env bash first line", hookFile)
	}
	for _, want := range []string{
		"BUCKET=hpsearch\n", "QUEUE=hpsearch-gpu\n", "FUNCTION=hpsearch-trainer\n",
		"--runtime provided.al2023", "--architectures x86_64", "--handler bootstrap",
		"--memory-size 1024", "--timeout 30", `"AWS_ENDPOINT_URL":"http://localstack:4566"`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("%s: does not contain %q", hookFile, want)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not on PATH: the hook's syntax is not checked")
	}
	if out, err := exec.Command(bash, "-n", hookFile).CombinedOutput(); err != nil {
		t.Errorf("bash -n %s: %v\n%s", hookFile, err, out)
	}
}
