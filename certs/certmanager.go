package certs

import (
	"context"
	"errors"
	"fmt"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// CertManagerOptions configure the cert-manager mode.
type CertManagerOptions struct {
	// Namespace and Certificate name the cert-manager Certificate of the
	// webhook Service; its spec.secretName is where the key pair is read.
	Namespace   string
	Certificate string

	// SyncInterval is how often the Certificate and its Secret are read, to
	// pick up a renewal.
	SyncInterval time.Duration
}

// CertManagerSource is the cert-manager mode: cert-manager issues and renews
// the certificate and its cainjector writes the CA bundle; this serves the
// key pair from the Certificate's Secret once the Certificate is Ready.
type CertManagerSource struct {
	servingCert
	certManager cmclient.Interface
	kube        kubernetes.Interface
	opts        CertManagerOptions
}

// NewCertManagerSource builds a CertManagerSource that talks to the API
// server at cfg.
func NewCertManagerSource(cfg *rest.Config, opts CertManagerOptions) (*CertManagerSource, error) {
	if opts.Namespace == "" || opts.Certificate == "" {
		return nil, errors.New("certs: the Certificate's namespace and name are required")
	}
	setDefault(&opts.SyncInterval, DefaultSyncInterval)
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &CertManagerSource{certManager: cm, kube: kube, opts: opts}, nil
}

// Start loads the key pair as soon as the Certificate is Ready and its Secret
// exists, then reloads it every SyncInterval until ctx ends.
func (s *CertManagerSource) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("certs")
	syncEvery(ctx, s.opts.SyncInterval, s.Sync, func(err error) {
		log.Info("waiting for the webhook certificate", "certificate", s.opts.Namespace+"/"+s.opts.Certificate, "reason", err.Error())
	})
	return nil
}

// NeedLeaderElection is false: every replica serves.
func (*CertManagerSource) NeedLeaderElection() bool { return false }

// Sync loads the key pair of the Certificate's Secret when the Certificate is
// Ready. Until the first success the server has nothing to serve and is not
// ready; afterwards a failure keeps the pair loaded last.
func (s *CertManagerSource) Sync(ctx context.Context) error {
	crt, err := s.certManager.CertmanagerV1().Certificates(s.opts.Namespace).Get(ctx, s.opts.Certificate, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !certificateReady(crt) {
		return fmt.Errorf("certificate %s/%s is not Ready", crt.Namespace, crt.Name)
	}
	secret, err := s.kube.CoreV1().Secrets(s.opts.Namespace).Get(ctx, crt.Spec.SecretName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := s.load(KeyPair{CertPEM: secret.Data[corev1.TLSCertKey], KeyPEM: secret.Data[corev1.TLSPrivateKeyKey]}); err != nil {
		return fmt.Errorf("secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

func certificateReady(crt *cmapi.Certificate) bool {
	for _, c := range crt.Status.Conditions {
		if c.Type == cmapi.CertificateConditionReady {
			return c.Status == cmmeta.ConditionTrue && c.ObservedGeneration >= crt.Generation
		}
	}
	return false
}
