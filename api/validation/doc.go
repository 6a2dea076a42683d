// Package validation contains every rule an LBRegistrar must satisfy, as pure
// functions: the admission webhooks, the reconciler and the lbregistrar CLI
// all call these, so a rule lives in one place.
//
// The rules run over the normalized v1beta1 spec (v1alpha1.NormalizeSpec),
// so an old v1alpha1 spec means the same thing here as everywhere else; rules
// about fields only v1alpha1 has read the original object. Errors name the
// field the user wrote, in the version the user wrote it in.
//
// Validators never stop at the first error: they return every problem as a
// field.ErrorList and every deprecation as a warning. Each error carries the
// name of the rule it broke in field.Error.Origin (the Rule* constants), which
// the webhook uses as a metric label.
//
// Updates are checked like creates, with two allowances so that objects that
// already exist stay editable:
//   - an error the old object already had, on the same field with the same
//     value, is returned as a warning instead (ratcheting, see Ratchet);
//   - v1alpha1 specs that mix services with service, nodePort or port are an
//     error on create and a warning on update.
//
// What may change on update:
//   - spec.loadBalancerId is immutable: the backends already registered on the
//     old load balancer would be left behind, and the claim index would move
//     without the old load balancer ever being cleaned. Use a new resource
//     (and delete the old one) to move to another load balancer.
//   - everything else is handled by the reconciler: targets, ports, weights and
//     backend set names may change (what a resource registered is recorded in
//     status.backendSets and removed when no longer wanted), the API key may be
//     rotated (the next call uses the new key; the load balancer is the same),
//     and nodeSelector may change (nodes no longer selected are deregistered).
//
// See docs/validation.md for the list of rules.
package validation
