# One image for every role: `serve`, `worker`, `migrate` (and `dev`, which
# also needs node for the Solana devnet).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/agentpay ./cmd/agentpay

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/agentpay /usr/local/bin/agentpay
USER 65534:65534
ENTRYPOINT ["agentpay"]
