# Builds the single configpub binary into a minimal image. The Config Server
# runs as `configpub serve`; the same image runs compile/publish/promote in CI.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# configpub --version prints these: docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) .
ARG VERSION=devel
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/configpub ./cmd/configpub

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/configpub /usr/local/bin/configpub
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/configpub"]
CMD ["serve", "--listen", ":8080"]
