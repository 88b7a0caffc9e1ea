package tiers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/internal/s3test"
)

// TestS3CredentialChain takes the keys from each place of the AWS chain
// that needs no network (the environment, the shared credentials file
// with a profile), and checks that a wrong secret or none at all fails
// with the server's answer and a hint, never with the secret in the
// message (nor "offline": the server answered), and leaves the disk's
// copy where it was.
func TestS3CredentialChain(t *testing.T) {
	srv := startS3(t)
	dir := t.TempDir()
	cfg := s3Config(t, dir, srv.Addr)
	hot, cold := cfg.Tiers[0], cfg.Tiers[1]
	files := s3Fixture(t, hot.Root, 3)
	credFile := filepath.Join(dir, "credentials")
	writeCreds := func(secret string) {
		t.Helper()
		ini := "[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing-at-all\n\n" +
			"[ops]\naws_access_key_id = " + s3test.AccessKey + "\naws_secret_access_key = " + secret + "\n"
		if err := os.WriteFile(credFile, []byte(ini), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fromFile := func(t *testing.T, profile string) {
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credFile)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
		t.Setenv("AWS_PROFILE", profile)
		t.Setenv("HOME", dir) // no ~/.aws of the machine's
	}
	migrate := func(t *testing.T, name string) error {
		t.Helper()
		_, err := s3Manager(t, cfg).Migrate(context.Background(), name, "", cold, false)
		return err
	}
	refused := func(t *testing.T, err error, secret string, hints ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("migrate succeeded without the right credentials")
		}
		msg := err.Error()
		if secret != "" && strings.Contains(msg, secret) {
			t.Fatalf("the error shows the secret: %s", msg)
		}
		for _, h := range hints {
			if !strings.Contains(msg, h) {
				t.Fatalf("error %q does not say %q", msg, h)
			}
		}
		checkHot(t, hot.Root, artifactFiles(files, "tiny.gguf"))
	}

	t.Run("wrong secret in the profile", func(t *testing.T) {
		writeCreds("a-wrong-secret-0123456789")
		fromFile(t, "ops")
		refused(t, migrate(t, "tiny.gguf"), "a-wrong-secret-0123456789", "s3://models/archive/", "refuses the credentials from the shared files", "profile ops")
	})
	t.Run("an access key the server does not know", func(t *testing.T) {
		fromFile(t, "")
		t.Setenv("AWS_ACCESS_KEY_ID", "nobody-knows-this-key")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-0123456789")
		err := migrate(t, "tiny.gguf")
		refused(t, err, "a-wrong-secret-0123456789", "refuses the credentials from the environment")
		if strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("an unknown key reported as a missing bucket: %v", err)
		}
	})
	t.Run("a bucket that does not exist", func(t *testing.T) {
		c := s3Config(t, t.TempDir(), srv.Addr)
		c.Tiers[1].S3.Bucket = "no-such-bucket"
		_, err := s3Manager(t, c).Migrate(context.Background(), "tiny.gguf", "", c.Tiers[1], false)
		if err == nil || !strings.Contains(err.Error(), "bucket no-such-bucket does not exist") {
			t.Fatalf("migrate to a missing bucket: %v", err)
		}
	})
	t.Run("no credentials anywhere", func(t *testing.T) {
		// s3test.Start set AWS_EC2_METADATA_DISABLED=true: the chain then
		// asks no instance metadata service, and finds nothing.
		fromFile(t, "")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "absent"))
		refused(t, migrate(t, "tiny.gguf"), "", "none were found", "AWS_PROFILE", "Access Denied")
	})
	t.Run("shared file, AWS_PROFILE", func(t *testing.T) {
		writeCreds(s3test.SecretKey)
		fromFile(t, "ops")
		if err := migrate(t, "tiny.gguf"); err != nil {
			t.Fatalf("migrate with the profile's keys: %v", err)
		}
		checkObjectsHold(t, srv, artifactFiles(files, "tiny.gguf"))
	})
	t.Run("environment first", func(t *testing.T) {
		writeCreds("a-wrong-secret-0123456789")
		fromFile(t, "ops")
		t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
		if _, _, err := s3Manager(t, cfg).EnsureHot(context.Background(), "tiny.gguf", hot, false); err != nil {
			t.Fatalf("ensure-hot with the environment's keys over a wrong profile: %v", err)
		}
		checkHot(t, hot.Root, artifactFiles(files, "tiny.gguf"))
	})
	t.Run("wrong secret, looking for a copy on the bucket", func(t *testing.T) {
		writeCreds("a-wrong-secret-0123456789")
		fromFile(t, "ops")
		m := s3Manager(t, cfg)
		_, _, err := m.Resolve("tiny.gguf")
		if err != nil {
			t.Fatal(err) // the disk's copy is found first
		}
		_, _, err = m.Resolve("nowhere.gguf")
		refused(t, err, "a-wrong-secret-0123456789", "tier s3 (s3://models/archive/nowhere.gguf, which refuses the credentials from the shared files")
	})
}
