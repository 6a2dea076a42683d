// Package conversion converts LBRegistrar between v1alpha1 (the original,
// single-service shape) and v1beta1 (the hub and storage version).
//
// Every function here is pure and total: it never fails, whatever a stored
// object holds, because an object the API server cannot convert becomes
// unreadable. Conversion is lossless in both directions: what one version
// cannot express is kept in an annotation and restored on the way back, the
// way cluster-api does it, but only while the visible fields still agree with
// it, so an edit made through the other version always wins.
//
// The same NormalizeSpec serves the conversion webhook, the validating webhook,
// the CLI and the reconciler, so an old spec means one thing everywhere.
package conversion
