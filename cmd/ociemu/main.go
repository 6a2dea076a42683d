// Command ociemu serves the OCI Load Balancing and Network Load Balancer API
// emulator (package test/ociemu) for local runs: point an SDK client's Host
// at the printed URL and sign with a key registered here.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func main() {
	var (
		opts       ociemu.Options
		seedFile   = flag.String("seed", "", "YAML or JSON file with the load balancers to serve")
		caOut      = flag.String("ca-out", "", "write the HTTPS CA certificate (PEM) to this file")
		credsDir   = flag.String("credentials-dir", "", "generate an API key and write key.pem and config (OCI config file format) here")
		publicKey  = flag.String("public-key", "", "register this RSA public key (PEM) for -tenancy and -user")
		tenancy    = flag.String("tenancy", "", "tenancy OCID for -public-key")
		user       = flag.String("user", "", "user OCID for -public-key")
		classic409 = flag.String("classic-conflict-code", "", "service code of the 409 a busy classic load balancer returns (default Conflict)")
	)
	flag.StringVar(&opts.HTTPAddress, "http", "127.0.0.1:0", "plain HTTP listen address")
	flag.StringVar(&opts.HTTPSAddress, "https", "127.0.0.1:0", "HTTPS listen address")
	flag.DurationVar(&opts.WorkRequestLatency, "work-request-latency", 0, "time a work request takes from ACCEPTED to SUCCEEDED")
	flag.StringVar(&opts.Region, "region", "us-ashburn-1", "region used in generated OCIDs and credentials")
	flag.Parse()
	opts.ClassicConflictCode = *classic409

	emu, err := ociemu.Start(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Close()
	if *seedFile != "" {
		seed, err := ociemu.LoadSeedFile(*seedFile)
		if err == nil {
			err = emu.SeedState(seed)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	if *caOut != "" {
		if err := os.WriteFile(*caOut, emu.CACertPEM(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if *publicKey != "" {
		data, err := os.ReadFile(*publicKey)
		if err != nil {
			log.Fatal(err)
		}
		u, err := emu.RegisterPublicKey(*tenancy, *user, data)
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("registered key %s", u.KeyID())
	}
	if *credsDir != "" {
		if err := writeCredentials(emu, *credsDir); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("http  %s\nhttps %s\nstate %s/admin/state\n", emu.URL(), emu.HTTPSURL(), emu.URL())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}

// writeCredentials registers a new API key and writes it as an OCI config
// file profile plus the private key, readable by the owner only.
func writeCredentials(emu *ociemu.Emulator, dir string) error {
	key, err := emu.NewAPIKey()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, key.PrivateKeyPEM, 0o600); err != nil {
		return err
	}
	profile := fmt.Sprintf("[DEFAULT]\nuser=%s\nfingerprint=%s\ntenancy=%s\nregion=%s\nkey_file=%s\n",
		key.User.User, key.Fingerprint, key.Tenancy, key.Region, keyFile)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(profile), 0o600); err != nil {
		return err
	}
	log.Printf("wrote credentials for %s to %s", key.User.User, dir)
	return nil
}
