package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// MinIOVersion is the MinIO module version that the Makefile builds into
// bin/tools (its MINIO_VERSION: keep the two the same). MinIO's release tags
// are not Go module versions, so the pin is the pseudo-version of a commit,
// the last one of github.com/minio/minio.
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// MinIOStartTimeout bounds how long StartMinIO waits for the server to be ready.
const MinIOStartTimeout = 30 * time.Second

// The root credentials of every MinIO that StartMinIO starts. MinIO wants a
// user of at least 3 characters and a password of at least 8.
const (
	minIOAccessKey = "fleet-root"
	minIOSecretKey = "fleet-root-secret"
)

// MinIOBinary returns where the Makefile builds MinIOVersion:
// bin/tools/minio-<version> under the repository root. It does not check
// that the file exists.
func MinIOBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "tools", "minio-"+MinIOVersion), nil
}

// MinIO is a running MinIO server, an S3 server that verifies signatures
// (moto does not), for tests of presigned URLs.
type MinIO struct {
	// Endpoint is the server's URL, e.g. http://127.0.0.1:40123, for
	// AWS_ENDPOINT_URL_S3. Clients must use path-style addressing.
	Endpoint string
	// AccessKey and SecretKey are the root credentials: fleet-root and
	// fleet-root-secret.
	AccessKey string
	SecretKey string

	dir      string // the data directory
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	output   *tail
	stopOnce sync.Once
	stopErr  error
}

// StartMinIO starts binary (a MinIO server, see MinIOBinary) on a free
// loopback port, over a new temporary data directory, with the root
// credentials in AccessKey and SecretKey and without its web console, with
// none of the caller's AWS variables (ProcessEnv). It waits
// until the server is ready, at most MinIOStartTimeout; ctx bounds only that
// wait, not the server's life: call Stop.
func StartMinIO(ctx context.Context, binary string) (*MinIO, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("start minio: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("start minio: %w", err)
	}
	dir, err := os.MkdirTemp("", "minio-")
	if err != nil {
		return nil, fmt.Errorf("start minio: %w", err)
	}
	cmd := exec.Command(binary, "server", "--address", addr, "--quiet", dir)
	cmd.Env = ProcessEnv(map[string]string{
		"MINIO_ROOT_USER":     minIOAccessKey,
		"MINIO_ROOT_PASSWORD": minIOSecretKey,
		"MINIO_BROWSER":       "off",
		"MINIO_UPDATE":        "off",
	})
	setProcessGroup(cmd)
	m := &MinIO{
		Endpoint:  "http://" + addr,
		AccessKey: minIOAccessKey,
		SecretKey: minIOSecretKey,
		dir:       dir,
		cmd:       cmd,
		exited:    make(chan struct{}),
		output:    &tail{max: 8 << 10},
	}
	cmd.Stdout = m.output
	cmd.Stderr = m.output
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start minio: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		close(m.exited)
	}()

	timer := time.NewTimer(MinIOStartTimeout)
	defer timer.Stop()
	for status(ctx, m.Endpoint+"/minio/health/ready") != http.StatusOK {
		select {
		case <-m.exited:
			_ = m.Stop()
			return nil, fmt.Errorf("start minio: exited (%v): %s", cmd.ProcessState, m.output)
		case <-timer.C:
			_ = m.Stop()
			return nil, fmt.Errorf("start minio: %s not ready within %v: %s", m.Endpoint, MinIOStartTimeout, m.output)
		case <-ctx.Done():
			_ = m.Stop()
			return nil, fmt.Errorf("start minio: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return m, nil
}

// Stop stops the server (its whole process group) and removes its data
// directory. It is safe to call more than once.
func (m *MinIO) Stop() error {
	if m == nil {
		return nil
	}
	m.stopOnce.Do(func() {
		m.stopErr = stopGroup(m.cmd, m.exited, "minio")
		if err := os.RemoveAll(m.dir); err != nil {
			m.stopErr = errors.Join(m.stopErr, fmt.Errorf("stop minio: %w", err))
		}
	})
	return m.stopErr
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// UpMinIO starts the MinIO the Makefile built (MinIOBinary) and points this
// process's AWS SDK at it, as LocalAWS does for moto: AWS_ENDPOINT_URL_S3,
// its root credentials and LocalRegion, without any session token or
// profile. A MinIO that is not built yet is an error that says how to build
// it. Call Stop.
func UpMinIO(ctx context.Context) (*MinIO, error) {
	binary, err := MinIOBinary()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("MinIO %s is not built (%v): run make test, which builds it first", MinIOVersion, err)
	}
	m, err := StartMinIO(ctx, binary)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_S3":   m.Endpoint,
		"AWS_ACCESS_KEY_ID":     m.AccessKey,
		"AWS_SECRET_ACCESS_KEY": m.SecretKey,
		"AWS_REGION":            LocalRegion,
	} {
		_ = os.Setenv(k, v)
	}
	_ = os.Unsetenv("AWS_SESSION_TOKEN")
	_ = os.Unsetenv("AWS_PROFILE")
	return m, nil
}
