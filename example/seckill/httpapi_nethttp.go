package seckill

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

type idsKey struct{}

type ids struct{ user, voucher int64 }

// NewHTTPHandler is NewFiberApp on net/http (serve -http nethttp): the
// same routes, checks and outcomes. With LockRedis the order route is
// wrapped by the lockgate net/http middleware.
// Errors: as NewFiberApp.
func NewHTTPHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /vouchers/{voucher_id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := parseID("voucher_id", r.PathValue("voucher_id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorReply{err.Error()})
			return
		}
		v, err := cfg.Service.Store.Voucher(r.Context(), id)
		if err != nil {
			code, msg := cfg.outcome(r.Context(), err)
			writeJSON(w, code, errorReply{msg})
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.Handle("POST /voucher-order/seckill/{voucher_id}", cfg.httpValidate(cfg.httpLock(http.HandlerFunc(cfg.httpOrder))))
	return mux, nil
}

// httpValidate enforces the body limit (413) and checks the ids (400) and
// the voucher (404) before next; nothing is locked or written when it
// answers.
func (cfg Config) httpValidate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > int64(cfg.BodyLimit) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorReply{MsgBodyTooLarge})
			return
		}
		if r.Body != nil {
			_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, int64(cfg.BodyLimit)))
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeJSON(w, http.StatusRequestEntityTooLarge, errorReply{MsgBodyTooLarge})
				return
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, errorReply{"unreadable request body"})
				return
			}
		}
		voucherID, err := parseID("voucher_id", r.PathValue("voucher_id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorReply{err.Error()})
			return
		}
		userID, err := parseID("user_id", r.URL.Query().Get("user_id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorReply{err.Error()})
			return
		}
		ok, err := cfg.Service.Store.VoucherExists(r.Context(), voucherID)
		if err != nil {
			code, msg := cfg.outcome(r.Context(), err)
			writeJSON(w, code, errorReply{msg})
			return
		}
		if !ok {
			writeJSON(w, http.StatusNotFound, errorReply{MsgUnknownVoucher})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), idsKey{}, ids{userID, voucherID})))
	})
}

func (cfg Config) httpLock(next http.Handler) http.Handler {
	switch cfg.Mode {
	case LockRedis:
		return cfg.httpRedisLock(next)
	case LockLocal:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Context().Value(idsKey{}).(ids)
			ctx, cancel := context.WithTimeout(r.Context(), cfg.Wait)
			unlock, err := cfg.local.Lock(ctx, OrderKey(id.user, id.voucher))
			cancel()
			if err != nil {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusTooManyRequests, errorReply{"System busy, please try later"})
				return
			}
			defer unlock()
			next.ServeHTTP(w, r)
		})
	}
	return next
}

func (cfg Config) httpOrder(w http.ResponseWriter, r *http.Request) {
	id := r.Context().Value(idsKey{}).(ids)
	orderID, err := cfg.Service.Order(r.Context(), id.user, id.voucher)
	if err != nil {
		code, msg := cfg.outcome(r.Context(), err)
		writeJSON(w, code, errorReply{msg})
		return
	}
	writeJSON(w, http.StatusOK, orderReply{OrderID: orderID})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
