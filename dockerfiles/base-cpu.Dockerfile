# mmaas's CPU base image (default mmaas/base:bookworm): the root file system that
# scripts/make_base_image.sh debootstraps (Debian minbase + python3, python3-venv,
# ca-certificates and the host's CA bundle, apt lists and docs stripped) as one layer.
# No image is pulled: the build context is that script's rootfs.tar and this file.
#   docker build -f dockerfiles/base-cpu.Dockerfile --build-arg SUITE=bookworm \
#     --build-arg RECIPE=<sha256 of the recipe> -t mmaas/base:bookworm <context>
FROM scratch
ARG SUITE=bookworm
ARG RECIPE=unknown
ADD rootfs.tar /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
LABEL mmaas.base.recipe=$RECIPE \
      org.opencontainers.image.title=mmaas-base \
      org.opencontainers.image.description="Debian $SUITE minbase, python3, venv, host CA bundle"
CMD ["python3"]
