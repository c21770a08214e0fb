//go:build nodev

package app

import (
	"context"
	"errors"
	"io"
)

// runDev stands in for dev mode (dev.go) in the production build, which
// links none of the private services: it says how to get a build with them.
func runDev(context.Context, func(string) string, io.Writer, io.Writer) error {
	return errors.New("dev is not in this build: it was built with -tags nodev (the production build of deploy/Dockerfile, without the private services); build without the tag (make build) to run seckill dev")
}
