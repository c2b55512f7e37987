// Command cert-manager-controller is a test harness: the real controllers of cert-manager
// (github.com/cert-manager/cert-manager, the release hack/tools.sh names), wired by a minimal main
// so that the operator's cert-manager mode is tested against the controllers that issue
// certificates in a cluster, beside the test control plane (tests/operator/support/cert_manager_controller.py).
//
// Why a main of our own: cert-manager's cmd/controller is a nested module
// (github.com/cert-manager/cert-manager/controller-binary) that is not on the Go module proxy, and
// the proxy is all this project can download from. Its packages are in the main module, and Go's
// internal rule goes by import path: hack/tools.sh builds this file in a wrapper module whose path
// starts with github.com/cert-manager/cert-manager/, which may import them.
//
// It runs only what CA and self-signed issuance need, the way cmd/controller/app/controller.go
// runs them (one ContextFactory, each controller built from it, then the shared informers
// started): the Issuer and ClusterIssuer controllers (they mark issuers Ready), the
// CertificateRequest approver and its CA and self-signed signers, and the Certificate controllers
// (trigger, key manager, request manager, issuing, readiness, revision manager). No ACME, Vault,
// Venafi, ingress or Gateway shims, no leader election, no metrics or health servers, and no
// webhook (the webhook only validates and defaults what is created; the operator's objects are
// complete).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each package registers its controller (controller.Register) or issuer type in init.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to serve (required)")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "kube-system",
		"namespace holding the Secrets that ClusterIssuers name (cert-manager's --cluster-resource-namespace)")
	workers := flag.Int("concurrent-workers", 5, "workers per controller (cert-manager's default)")
	ownerRef := flag.Bool("enable-certificate-owner-ref", false,
		"make each Certificate the owner of its Secret, so the Secret goes with it (cert-manager's flag)")
	listControllers := flag.Bool("list-controllers", false, "print the controllers this harness runs and exit")
	version := flag.Bool("version", false, "print the cert-manager release built in and exit")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()

	names := make([]string, 0, len(controller.Known()))
	for name := range controller.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	if *version {
		fmt.Println(util.AppVersion)
		return
	}
	if *listControllers {
		for _, name := range names {
			fmt.Println(name)
		}
		return
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager-controller: --kubeconfig is required")
		os.Exit(2)
	}

	logf.InitLogs()
	defer logf.FlushLogs()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *workers, *ownerRef, names); err != nil {
		logf.Log.Error(err, "cert-manager-controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

// run builds every registered controller from one ContextFactory, starts the shared informers
// they registered, and runs them until ctx ends (cmd/controller/app/controller.go's Run, less its
// servers and leader election).
func run(ctx context.Context, kubeconfig, clusterResourceNamespace string, workers int, ownerRef bool,
	names []string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef: ownerRef,
			// cert-manager's default: every annotation but kubectl's, flux's and argocd's.
			CopiedAnnotationPrefixes: []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	group, ctx := errgroup.WithContext(ctx)
	for _, name := range names {
		built, err := controller.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		logf.Log.Info("starting controller", "controller", name)
		group.Go(func() error { return built.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	err = group.Wait()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
