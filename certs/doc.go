// Package certs provides the serving certificate of the webhook server, in one
// of two modes:
//
//   - built-in (Rotator): a self-signed CA and a serving certificate kept in
//     one Secret, the CA bundle written into the webhook configurations and
//     the CRD's conversion webhook, and rotation of both before they expire,
//     staged so that the API server never meets a certificate it does not
//     trust yet;
//   - cert-manager (CertManagerSource): cert-manager issues the certificate
//     and its cainjector writes the CA bundle; the server waits until the
//     Certificate is Ready and serves what its Secret contains.
//
// Either way the server reads the current certificate on every TLS handshake,
// so a renewal is served at once, without a restart and without dropping a
// connection.
package certs
