# evac's image: the `evac` binary and the policy modules under /policies, as deploy/ expects.
#   make image            (docker, or IMAGE_TOOL=podman)
FROM rust:1.95-bookworm AS build
RUN rustup target add wasm32-wasip1 wasm32-unknown-unknown
WORKDIR /src
COPY . .
RUN make build

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/evac /usr/local/bin/evac
COPY --from=build /src/dist/policies/ /policies/
# Numeric, so that the kubelet can check runAsNonRoot (distroless's nonroot is 65532).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/evac"]
