# Static lbregistrar binary on a distroless base, running as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# Every directory with a package cmd/lbregistrar imports
# (TestDockerfileCopiesEveryPackage checks).
COPY api/ api/
COPY certs/ certs/
COPY cmd/ cmd/
COPY config/crd/ config/crd/
COPY conversion/ conversion/
COPY index/ index/
COPY reconciler/ reconciler/
COPY webhook/ webhook/
# The context has no .git (.dockerignore): make image passes what
# lbregistrar version prints.
ARG VERSION=(devel)
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION} -X main.buildCommit=${COMMIT}" -o /out/lbregistrar ./cmd/lbregistrar

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lbregistrar /lbregistrar
USER 65532:65532
ENTRYPOINT ["/lbregistrar"]
