"""Deployment checks: Dockerfile, docker-compose.yml, deploy/k3s, Prometheus and Grafana."""
