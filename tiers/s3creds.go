package tiers

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// awsChain is the standard AWS credential chain, in the AWS SDKs' order:
// the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), the shared files (AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials, AWS_CONFIG_FILE or ~/.aws/config, profile
// AWS_PROFILE or default), then the role of the container or instance.
// AWS_EC2_METADATA_DISABLED=true leaves out the instance's metadata
// service, as it does for the AWS SDKs, so that a machine with no role
// sends it nothing; a container's or web identity's role still applies.
func awsChain(client *http.Client) *credentials.Credentials {
	providers := []credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}}
	if roleInChain() {
		providers = append(providers, &credentials.IAM{Client: client})
	}
	return credentials.NewChainCredentials(providers)
}

// roleInChain reports whether the chain ends with a role: one the
// environment names that is not the instance's (a container's
// credentials endpoint, a web identity token), or the instance's unless
// AWS_EC2_METADATA_DISABLED=true.
func roleInChain() bool {
	if firstEnv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
		return true
	}
	return !strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true")
}

// credentialSource says where the chain takes its keys from, as a
// person can check it, without sending a request and without the keys:
// "" when it finds none.
func credentialSource() string {
	if firstEnv("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY") != "" && firstEnv("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY") != "" {
		return "the environment (AWS_ACCESS_KEY_ID)"
	}
	profile := firstEnv("AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	home, _ := os.UserHomeDir()
	for _, f := range []string{firstEnv("AWS_SHARED_CREDENTIALS_FILE"), filepath.Join(home, ".aws", "credentials"), firstEnv("AWS_CONFIG_FILE"), filepath.Join(home, ".aws", "config")} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err == nil {
			return fmt.Sprintf("the shared files (%s, profile %s)", f, profile)
		}
	}
	if roleInChain() {
		return "the container's or instance's role"
	}
	return ""
}

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// A CredentialsError is a server's refusal of the keys the chain gave
// (or of a request without any): the tier is reachable, the keys are
// wrong, missing or not allowed there. Its message is what the tier does,
// to follow the tier's name.
type CredentialsError struct {
	Source string // where the keys came from; "" for none
	Err    error  // the server's answer
}

func (e *CredentialsError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("needs credentials, and none were found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a shared credentials file, or run with a role); the server answered: %v", e.Err)
	}
	return fmt.Sprintf("refuses the credentials from %s: %v", e.Source, e.Err)
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// refusedCredentials wraps a server's 401 or 403, or its codes for an
// unknown key or a bad signature, as a CredentialsError; any other error is returned
// as it is.
func refusedCredentials(err error) error {
	r := minio.ToErrorResponse(err)
	switch {
	case err == nil:
		return nil
	case r.StatusCode == http.StatusUnauthorized, r.StatusCode == http.StatusForbidden,
		r.Code == "AccessDenied", r.Code == "InvalidAccessKeyId", r.Code == "SignatureDoesNotMatch",
		r.Code == "XAdminUserNotFound": // versitygw's answer (a 404) to a key it does not know
		return &CredentialsError{Source: credentialSource(), Err: err}
	}
	return err
}

// isCredentialsError reports whether err is a refusal of the credentials.
func isCredentialsError(err error) bool {
	var ce *CredentialsError
	return errors.As(err, &ce)
}
