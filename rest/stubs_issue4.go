package rest

// Temporary (issue 4): each mount function is replaced by the engineer who
// implements its routes in their own file. This file must be gone before
// issue 4 is resolved.

import "github.com/go-chi/chi/v5"

// mountMerchantRoutes serves /checkout/merchants/... and /checkout/sessions/...
func (s *server) mountMerchantRoutes(r chi.Router) {}

// mountCheckoutPageRoutes serves /checkout/pay/...
func (s *server) mountCheckoutPageRoutes(r chi.Router) {}
