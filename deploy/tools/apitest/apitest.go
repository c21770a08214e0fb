// Package apitest checks what the server answers against gateway/openapi.yaml
// with an independent validator (kin-openapi), for the end-to-end tests: a
// Transport validates every HTTP answer (status, headers, body) of the route
// it was asked on, and Frames validates WebSocket frames against the schemas
// of gateway/wsframes.yaml. A test that passes then cannot hide a contract
// break. Only tests import it (deploy/tools/depcheck keeps it so); the product does
// not link kin-openapi.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// gatewayDir is the folder of gateway/openapi.yaml, found from this file so
// that a test of any package reads the same document.
func gatewayDir() string {
	_, file, _, _ := runtime.Caller(0) // deploy/tools/apitest/apitest.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "gateway")
}

// SpecPath is the file of gateway/openapi.yaml.
func SpecPath() string { return filepath.Join(gatewayDir(), "openapi.yaml") }

// Spec is gateway/openapi.yaml loaded, checked, with its router.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
	frames *openapi3.T
}

// Load reads and validates gateway/openapi.yaml and gateway/wsframes.yaml.
func Load() (*Spec, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(SpecPath())
	if err != nil {
		return nil, fmt.Errorf("load gateway/openapi.yaml: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("gateway/openapi.yaml is not valid OpenAPI: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route gateway/openapi.yaml: %w", err)
	}
	fl := openapi3.NewLoader()
	fl.IsExternalRefsAllowed = true
	frames, err := fl.LoadFromFile(filepath.Join(gatewayDir(), "wsframes.yaml"))
	if err != nil {
		return nil, fmt.Errorf("load gateway/wsframes.yaml: %w", err)
	}
	if err := frames.Validate(ctx); err != nil {
		return nil, fmt.Errorf("gateway/wsframes.yaml is not valid: %w", err)
	}
	return &Spec{doc: doc, router: router, frames: frames}, nil
}

// MustLoad is Load for a test: it fails t if the documents do not load.
func MustLoad(t testing.TB) *Spec {
	t.Helper()
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// contractHeaders are the answer headers the contract gives a meaning to: one
// of them on an answer whose response in the spec does not declare it is a
// mismatch (a client generated from the spec would not know it is there).
// Standard transport headers (Content-Type, Date...) and X-Request-Id, which
// the document's description puts on every answer, are not listed.
var contractHeaders = []string{
	"Retry-After", "ETag", "Cache-Control",
	"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
}

// Check validates one answer to req against the spec: the route must be
// in it, the status declared for it, and the declared headers and body as
// the spec says; contract headers it does not declare are mismatches too. A
// path the spec does not have must be answered 404 not_found (the spec: any
// unknown path), unless it is outside the contract (outsideContract). The request is not validated: tests send bad requests on
// purpose, and what they must get back is the spec's answer to them. Known
// mismatches (waivers.go) are left out.
func (s *Spec) Check(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := s.router.FindRoute(routable(req))
	var re *routers.RouteError
	reason := ""
	if errors.As(err, &re) {
		reason = re.Reason // the legacy router makes new errors of the same reasons
	}
	switch {
	case reason != "" && outsideContract(req.URL.Path, status):
		return nil
	case reason == routers.ErrPathNotFound.Error():
		if status != http.StatusNotFound && !operatorRefusal(req.URL.Path, status) {
			return fmt.Errorf("%s %s is no route of the spec, yet answered %d (an unknown path is 404)", req.Method, req.URL.Path, status)
		}
		return checkErrorBody(s.doc, body)
	case reason == routers.ErrMethodNotAllowed.Error():
		if status != http.StatusMethodNotAllowed && status != http.StatusNotFound {
			return fmt.Errorf("%s %s: the spec has no such operation, yet it answered %d", req.Method, req.URL.Path, status)
		}
		return checkErrorBody(s.doc, body)
	case err != nil:
		return fmt.Errorf("find the route of %s %s: %w", req.Method, req.URL.Path, err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	var errs []error
	// A HEAD answer has no body: its Content-Type is the GET's, which the
	// GET operation declares.
	if ct := header.Get("Content-Type"); strings.HasPrefix(ct, "text/") && req.Method != http.MethodHead {
		// The validator decodes no text body; the spec must declare the
		// type, and its schema is a string, which any text is.
		opts.ExcludeResponseBody = true
		if resp := route.Operation.Responses.Status(status); resp != nil && resp.Value != nil {
			mt, _, _ := strings.Cut(ct, ";")
			if resp.Value.Content.Get(mt) == nil {
				errs = append(errs, fmt.Errorf("content type %s is not declared for %d", mt, status))
			}
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		var multi openapi3.MultiError
		if errors.As(err, &multi) {
			for _, e := range multi {
				errs = append(errs, fmt.Errorf("response: %w", e))
			}
		} else {
			errs = append(errs, err)
		}
	}
	if resp := route.Operation.Responses.Status(status); resp != nil && resp.Value != nil {
		for _, h := range contractHeaders {
			if header.Get(h) != "" && !declares(resp.Value.Headers, h) {
				errs = append(errs, fmt.Errorf("header %s is sent but not declared for %d", h, status))
			}
		}
	}
	return unwaived(req.URL.Path, errs)
}

// unwaived joins the errors that are no known mismatch (waivers), each
// clipped: the validator quotes the whole value.
func unwaived(path string, errs []error) error {
	var left []error
	for _, err := range errs {
		if msg := err.Error(); !waived(path, msg) {
			left = append(left, errors.New(clip([]byte(msg))))
		}
	}
	return errors.Join(left...)
}

// outsideContract says whether an answer on a path the spec does not have
// is one the spec leaves out on purpose: Go's profiles behind the operator
// token (gateway/pprof.go), and the static files of web/ (the operator page
// /admin, scripts, styles) beside the API, which the routes test of
// gateway/ops_test.go leaves out too.
func outsideContract(path string, status int) bool {
	if strings.HasPrefix(path, "/api/v1/admin/debug/pprof") {
		return true
	}
	return !strings.HasPrefix(path, "/api/") && status != http.StatusNotFound
}

// routable is req as the router matches it: the spec's server is "/", so the
// host goes.
func routable(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	r.URL = &url.URL{Path: req.URL.Path, RawQuery: req.URL.RawQuery}
	r.Host = ""
	return r
}

func declares(headers openapi3.Headers, name string) bool {
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// checkErrorBody checks body is the spec's Error object.
func checkErrorBody(doc *openapi3.T, body []byte) error {
	ref := doc.Components.Schemas["Error"]
	if ref == nil || ref.Value == nil {
		return errors.New("the spec has no Error schema")
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the error body is not JSON: %w (%q)", err, body)
	}
	return ref.Value.VisitJSON(v)
}

// CheckFrame validates one text frame of GET /api/v1/ws against the schema
// gateway/wsframes.yaml gives its type.
func (s *Spec) CheckFrame(raw []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return fmt.Errorf("a frame that is no JSON object: %w", err)
	}
	root := s.frames.Components.Schemas["SocketFrame"].Value
	name, ok := root.Discriminator.Mapping[head.Type]
	if !ok {
		return fmt.Errorf("a frame of type %q, which gateway/wsframes.yaml does not have", head.Type)
	}
	ref := s.frames.Components.Schemas[strings.TrimPrefix(name.Ref, "#/components/schemas/")]
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("%s frame: %w", head.Type, err)
	}
	return nil
}

// FrameChecker validates frames for t: each frame that breaks its schema
// fails t (from any goroutine), naming the frame.
func (s *Spec) FrameChecker(t testing.TB) func(raw []byte) {
	return func(raw []byte) {
		if err := s.CheckFrame(raw); err != nil {
			t.Errorf("contract: WebSocket frame %s: %v", clip(raw), err)
		}
	}
}

// Transport is an http.RoundTripper that checks every answer from Base
// (the API at BaseURL) against the spec, failing T on a mismatch with the
// route, the status and the validator's message. Requests to other hosts
// (an ops listener) pass unchecked. Checks run on the buffered body, which
// the caller then reads as usual.
type Transport struct {
	T       testing.TB
	Spec    *Spec
	BaseURL string // scheme://host of the API, as the tests reach it
	Base    http.RoundTripper
}

// Wrap returns client's copy whose transport checks every answer from the
// API at baseURL; the original's transport does the exchange.
func Wrap(t testing.TB, client *http.Client, baseURL string) *http.Client {
	t.Helper()
	c := *client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &Transport{T: t, Spec: MustLoad(t), BaseURL: baseURL, Base: base}
	return &c
}

// RoundTrip does the exchange on Base, then checks the answer.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.Base.RoundTrip(req)
	if err != nil || !tr.ours(req) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := tr.Spec.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		tr.T.Errorf("contract: %s %s answered %d, which gateway/openapi.yaml does not allow: %v\nbody: %s",
			req.Method, req.URL.Path, resp.StatusCode, err, clip(body))
	}
	return resp, nil
}

func (tr *Transport) ours(req *http.Request) bool {
	u, err := url.Parse(tr.BaseURL)
	return err == nil && req.URL.Host == u.Host
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	const max = 400
	if len(b) > max {
		return string(b[:max]) + "... (" + strconv.Itoa(len(b)) + " bytes)"
	}
	return string(b)
}

// CloseIdleConnections lets go of Base's idle connections, as
// http.Client.CloseIdleConnections asks.
func (tr *Transport) CloseIdleConnections() {
	if c, ok := tr.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// operatorRefusal says whether status is the operator routes' refusal of a
// caller without the admin token (401, or 403 for a shopper's session):
// their group asks for the token before the route is looked up, so that a
// caller without it learns nothing of which operator routes exist.
func operatorRefusal(path string, status int) bool {
	return strings.HasPrefix(path, "/api/v1/admin/") && (status == http.StatusUnauthorized || status == http.StatusForbidden)
}
