package seckill

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/valyala/fasthttp"
)

// NewFiberApp returns the service's HTTP API on fiber:
//
//	POST /voucher-order/seckill/:voucher_id?user_id=N  → 200 {"order_id": N}
//	GET  /vouchers/:voucher_id                         → 200 {"id","stock","orders"}
//	GET  /healthz                                      → 200 ok
//	GET  /metrics                                      → cfg.Metrics, when set
//
// The order route checks the ids (400 naming the field) and the voucher
// (404) before any lock is taken, then locks per cfg.Mode: with LockRedis
// through the one-line lockgate middleware (429 with Retry-After when
// busy, 503 when Redis is down). Bodies over cfg.BodyLimit are 413. With
// cfg.Tracer the order route runs in a server span, its lock's span a
// child of it (tracing.go).
//
// Against slow and hostile clients the server applies cfg.Timeouts (a
// client that takes longer than the header or request timeout is answered
// 408 and disconnected, an idle keep-alive connection is closed) and
// refuses ambiguous framing (fiberFraming). Each knob is documented where
// it is set.
// Errors: a Config without Service, or without Locker in LockRedis, or
// bad Timeouts.
func NewFiberApp(cfg Config) (*fiber.App, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	to := cfg.Timeouts
	app := fiber.New(fiber.Config{
		// A larger declared body, or a chunked one that grows past it, is
		// refused with 413 by fasthttp before any handler runs.
		BodyLimit:             cfg.BodyLimit,
		DisableStartupMessage: true,
		ErrorHandler:          fiberError,
		// fasthttp arms ReadTimeout when a request starts (its first byte
		// on a keep-alive connection) and has no header timeout of its
		// own: it is the header timeout here, and HeaderReceived below
		// extends it for the body, so that the whole request gets
		// to.Read. Without it (the default: unlimited) a header sent one
		// byte at a time holds the connection for as long as the client
		// likes.
		ReadTimeout: to.ReadHeader,
		// WriteTimeout bounds writing the answer; fasthttp arms it when
		// the handler returns, so the lock wait is not part of it.
		WriteTimeout: to.Write,
		// IdleTimeout bounds the wait for the next request of a keep-alive
		// connection (it defaults to ReadTimeout, here the 2s header
		// timeout, which would cut healthy keep-alive clients).
		IdleTimeout: to.Idle,
		// ReadBufferSize bounds the request line and headers together
		// (fasthttp answers 431 past it): 4 KiB, fasthttp's default, set
		// so that it does not change under us.
		ReadBufferSize: 4096,
		// The body is read in full, within the read timeout and BodyLimit,
		// before any handler runs. Streaming (true) would run handlers
		// with the body still on the wire, outside both bounds.
		StreamRequestBody: false,
		// No route takes a form: do not parse multipart bodies (CPU and
		// memory for every part) before the handler.
		DisablePreParseMultipartForm: true,
		// Route parameters stay as sent (%31 is not "1"): the handler and
		// the lock key read the same text, and a path cannot be decoded
		// into another route or id after routing.
		UnescapePath: false,
		// ProxyHeader stays empty and trusted-proxy checks off: nothing
		// here reads c.IP() or X-Forwarded-*, and no client header is
		// trusted.
	})
	srv := app.Server()
	if extra := to.Read - to.ReadHeader; extra > 0 {
		// Called once the header is in: the body gets the rest of the
		// request's time (a new read deadline of Read - ReadHeader).
		srv.HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: extra}
		}
	}
	// Answers sent while the server shuts down carry Connection: close, so
	// keep-alive clients go elsewhere instead of reusing a closing node.
	srv.CloseOnShutdown = true
	// First of every route: requests whose body length is ambiguous.
	app.Use(fiberFraming)
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	if cfg.Metrics != nil {
		// net/http's handler on fasthttp: the request is copied into an
		// http.Request and the answer back (adaptor), which is fine for a
		// scrape every few seconds.
		app.Get("/metrics", adaptor.HTTPHandler(cfg.Metrics))
	}
	app.Get("/vouchers/:voucher_id", func(c *fiber.Ctx) error {
		id, err := parseID("voucher_id", c.Params("voucher_id"))
		if err != nil {
			return c.Status(fiber.StatusBadRequest).JSON(errorReply{err.Error()})
		}
		v, err := cfg.Service.Store.Voucher(c.UserContext(), id)
		if err != nil {
			code, msg := cfg.outcome(c.UserContext(), err)
			return c.Status(code).JSON(errorReply{msg})
		}
		return c.JSON(v)
	})
	const orderRoute = "/voucher-order/seckill/:voucher_id"
	var order []fiber.Handler
	if cfg.Tracer != nil {
		order = append(order, cfg.fiberTrace(fiber.MethodPost, orderRoute))
	}
	order = append(order, cfg.fiberValidate, cfg.fiberLock(), cfg.fiberOrder)
	app.Post(orderRoute, order...)
	return app, nil
}

// fiberFraming refuses, with 400 and Connection: close, a request with
// more than one Content-Length header, with any Transfer-Encoding, or with
// whitespace between a header's name and its colon: the request-smuggling
// shapes that fasthttp accepts. This module builds with fasthttp v1.69
// (Fiber v3 requires it, so Fiber v2 runs on it too); it refuses several
// Content-Length headers and a Transfer-Encoding other than chunked or
// identity itself (400, closing), but it reads "Transfer-Encoding:
// chunked" with a Content-Length as chunked and keeps the connection open,
// and it does not take "Content-Length : 52" as the length (RFC 9112 §5.1:
// a server must reject a space before the colon): it reads no body and
// serves the 52 bytes after the header as a second request on the same
// connection, where a proxy in front that trims the space sees one (v1.51,
// which Fiber v2.52 asks for, refused that one and took the last of
// several Content-Length headers). Fiber has no setting for this
// (fiber.Config only sets the body limit, streaming and timeouts), so the
// check is the first handler of the app, reading the raw header lines
// fasthttp keeps. The service takes no chunked body. Closing the
// connection drops whatever the client sent after the body: it is never
// parsed as a request. (A malformed or non-numeric Content-Length, or a
// tab before the colon, fasthttp already refuses with 400 and closes.)
// NewFiberV3App's fiberV3Framing does the same.
func fiberFraming(c *fiber.Ctx) error {
	if ambiguousFraming(c.Request().Header.RawHeaders()) {
		c.Context().SetConnectionClose()
		return c.Status(fiber.StatusBadRequest).JSON(errorReply{MsgBadFraming})
	}
	return c.Next()
}

// ambiguousFraming reports whether raw, a request's header lines as sent,
// holds more than one Content-Length, any Transfer-Encoding, or a header
// name with whitespace around it (before the colon, or an obs-fold
// continuation taken for a name).
func ambiguousFraming(raw []byte) bool {
	var lengths, encodings int
	for _, line := range bytes.Split(raw, []byte("\n")) {
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		trimmed := bytes.TrimSpace(name)
		if len(trimmed) != len(name) {
			return true
		}
		switch {
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			lengths++
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			encodings++
		}
	}
	return lengths > 1 || encodings > 0
}

// fiberValidate checks the ids and that the voucher exists; nothing is
// locked or written when it answers. The ids go on in c.Locals.
func (cfg Config) fiberValidate(c *fiber.Ctx) error {
	id, code, msg := cfg.checkOrder(c.UserContext(), c.Params("voucher_id"), c.Query("user_id"))
	if code != 0 {
		return c.Status(code).JSON(errorReply{msg})
	}
	c.Locals(idsKey{}, id)
	return c.Next()
}

// fiberLock returns the lock step of cfg.Mode.
func (cfg Config) fiberLock() fiber.Handler {
	switch cfg.Mode {
	case LockRedis:
		return cfg.fiberRedisLock()
	case LockLocal:
		return func(c *fiber.Ctx) error {
			unlock, ok := cfg.lockLocal(c.UserContext(), c.Locals(idsKey{}).(ids))
			if !ok {
				c.Set(fiber.HeaderRetryAfter, "1")
				return c.Status(fiber.StatusTooManyRequests).JSON(errorReply{MsgBusy})
			}
			defer unlock()
			return c.Next()
		}
	}
	return func(c *fiber.Ctx) error { return c.Next() }
}

// fiberOrder is the handler: it runs with the lease's context as the
// request's user context when a Redis lock guards it.
func (cfg Config) fiberOrder(c *fiber.Ctx) error {
	ctx := c.UserContext()
	id := c.Locals(idsKey{}).(ids)
	orderID, err := cfg.Service.Order(ctx, id.user, id.voucher)
	if err != nil {
		code, msg := cfg.outcome(ctx, err)
		if ra := orderRetryAfter(err); ra != "" {
			c.Set(fiber.HeaderRetryAfter, ra)
		}
		return c.Status(code).JSON(errorReply{msg})
	}
	return c.JSON(orderReply{OrderID: orderID})
}

// fiberError renders the errors of Fiber and fasthttp (413 body too
// large, 404 no route, 405, 408, 431, 400 for a request fasthttp could
// not parse) as JSON with a fixed text — never the error's own, which for
// a parse error is fasthttp's and quotes the raw request bytes (headers,
// cookies) back; anything else is a 500 without internal text. The
// routes' handlers answer for themselves and return no *fiber.Error.
func fiberError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(errorReply{fixedErrorText(fe.Code)})
	}
	return c.Status(fiber.StatusInternalServerError).JSON(errorReply{MsgInternal})
}

// fixedErrorText is the text of a Fiber error's answer.
func fixedErrorText(code int) string {
	switch {
	case code == http.StatusRequestEntityTooLarge:
		return MsgBodyTooLarge
	case code >= http.StatusInternalServerError:
		return MsgInternal
	case http.StatusText(code) != "":
		return http.StatusText(code)
	}
	return "Bad request"
}
