// Command ociemu serves the OCI Load Balancing and Network Load Balancer API
// emulator (package test/ociemu) for local runs: point an SDK client's Host
// at the printed URL and sign with a key registered here. docs/oci-emulator.md
// describes it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run serves until ctx is done, after printing the endpoints to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	var opts ociemu.Options
	flags := flag.NewFlagSet("ociemu", flag.ContinueOnError)
	seedFile := flags.String("seed", "", "YAML or JSON file with the load balancers to serve")
	caOut := flags.String("ca-out", "", "write the HTTPS CA certificate (PEM) to this file")
	credsDir := flags.String("credentials-dir", "", "generate an API key and write key.pem and config (OCI config file format) here")
	publicKey := flags.String("public-key", "", "register this RSA public key (PEM) for -tenancy and -user")
	tenancy := flags.String("tenancy", "", "tenancy OCID for -public-key")
	user := flags.String("user", "", "user OCID for -public-key")
	flags.StringVar(&opts.HTTPAddress, "http", "127.0.0.1:0", "plain HTTP listen address")
	flags.StringVar(&opts.HTTPSAddress, "https", "127.0.0.1:0", "HTTPS listen address")
	flags.DurationVar(&opts.WorkRequestLatency, "work-request-latency", 0, "time a work request takes from ACCEPTED to SUCCEEDED")
	flags.StringVar(&opts.ClassicConflictCode, "classic-conflict-code", "", "service code of the 409 a busy classic load balancer returns (default Conflict)")
	flags.StringVar(&opts.Region, "region", "us-ashburn-1", "region used in generated OCIDs and credentials")
	if err := flags.Parse(args); err != nil {
		return err
	}

	emu, err := ociemu.Start(opts)
	if err != nil {
		return err
	}
	defer emu.Close()
	if *seedFile != "" {
		seed, err := ociemu.LoadSeedFile(*seedFile)
		if err != nil {
			return err
		}
		if err := emu.SeedState(seed); err != nil {
			return fmt.Errorf("%s: %w", *seedFile, err)
		}
	}
	if *caOut != "" {
		if err := os.WriteFile(*caOut, emu.CACertPEM(), 0o644); err != nil {
			return err
		}
	}
	if *publicKey != "" {
		data, err := os.ReadFile(*publicKey)
		if err != nil {
			return err
		}
		u, err := emu.RegisterPublicKey(*tenancy, *user, data)
		if err != nil {
			return fmt.Errorf("%s: %w", *publicKey, err)
		}
		log.Printf("registered key %s", u.KeyID())
	}
	if *credsDir != "" {
		if err := writeCredentials(emu, *credsDir); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "http  %s\nhttps %s\nstate %s/admin/state\n", emu.URL(), emu.HTTPSURL(), emu.URL())
	<-ctx.Done()
	return nil
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
